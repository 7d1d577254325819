# SPDX-License-Identifier: BSD-3-Clause
"""Where a peer's peak PSS goes: runs one peer (as one_run.py makes it) for
half an epoch after a warm-up epoch, then prints, per process of its tree,
Pss split into anonymous, file-backed and shared memory (smaps_rollup), and
the command line. For the memory rows of docs/peers.md.

    python bench/peers/memory.py PEER --folder DIR [--ring-slots N]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import one_run  # noqa: E402
import peers  # noqa: E402


def rollup(pid):
    fields = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if parts[0] in ("Pss:", "Pss_Anon:", "Pss_File:", "Pss_Shmem:"):
                fields[parts[0][:-1]] = int(parts[1]) / 1024
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        command = f.read().replace(b"\0", b" ").decode()[:90]
    return fields, command


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("peer", choices=sorted(peers.PEERS))
    parser.add_argument("--folder")
    parser.add_argument("--shards")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--ring-slots", type=int, default=0,
                        help="ringloader rows: DataLoader(ring_slots=N)")
    opts = parser.parse_args()
    import torch
    torch.set_num_threads(1)
    if opts.peer.endswith("-noprestart"):
        os.environ["RINGLOADER_PRESTART"] = "0"  # before the import below
    if opts.ring_slots:
        import ringloader
        original = ringloader.DataLoader.__init__

        def with_slots(self, *args, **kwargs):
            original(self, *args, **dict(kwargs, ring_slots=opts.ring_slots))
        ringloader.DataLoader.__init__ = with_slots
    epoch = peers.PEERS[opts.peer](opts)
    for images, _ in epoch():
        float(images[0, 0, 0, 0])
    for n, (images, _) in enumerate(epoch()):
        if n == 15:
            break
    total = {}
    print(f"{'pid':>7} {'Pss':>7} {'Anon':>7} {'File':>7} {'Shmem':>7}  command (MiB)")
    for pid in one_run.tree_pids(os.getpid()):
        try:
            fields, command = rollup(pid)
        except OSError:
            continue
        for key, value in fields.items():
            total[key] = total.get(key, 0) + value
        print(f"{pid:7d} {fields['Pss']:7.0f} {fields['Pss_Anon']:7.0f} "
              f"{fields['Pss_File']:7.0f} {fields['Pss_Shmem']:7.0f}  {command}")
    print(f"{'tree':>7} {total['Pss']:7.0f} {total['Pss_Anon']:7.0f} "
          f"{total['Pss_File']:7.0f} {total['Pss_Shmem']:7.0f}")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
