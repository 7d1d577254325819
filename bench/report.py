#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Prints the table of bench/run_all.sh from the JSON files it wrote.

  /usr/bin/python3 bench/report.py BUILD_DIR/bench-results
"""
import glob
import json
import os
import statistics
import sys


def load(folder, pattern):
    out = []
    for path in sorted(glob.glob(os.path.join(folder, pattern))):
        with open(path) as f:
            out.append(json.load(f))
    return out


def best_rate(runs):
    """Best of the rounds: the one least disturbed by other load."""
    return max(r["images_per_s"] for r in runs) if runs else None


def fmt_rate(x):
    return "-" if x is None else f"{x:,.0f}"


def main():
    folder = sys.argv[1]
    rows = []
    notes = []
    for workload, label, target in [("jpeg", "JPEG ImageFolder, RRC(224)+flip+ToTensor+Normalize, batch 64", 3.0),
                                    ("jpeg-fast", "the same, ringloader fast mode (approximate pixels)", 5.0),
                                    ("fashion", "Fashion-MNIST IDX, ToTensor+Normalize, batch 256", 20.0)]:
        # Fast mode is measured against the same torch runs as exact mode.
        torch_runs = load(folder, f"{workload.split('-')[0]}-torch-*.json")
        ring_runs = load(folder, f"{workload}-ringloader-*.json")
        t, r = best_rate(torch_runs), best_rate(ring_runs)
        ratio = r / t if t and r else None
        verdict = "-" if ratio is None else ("PASS" if ratio >= target else "FAIL")
        rows.append((label, fmt_rate(t), fmt_rate(r),
                     "-" if ratio is None else f"{ratio:.2f}x",
                     f">= {target:g}x", verdict))
        if ring_runs:
            ts = ring_runs[-1]["timed_stats"]
            n = max(1, ts["samples"])
            notes.append(
                f"{workload}: {ring_runs[-1]['dataset_size']} images, "
                f"{ring_runs[-1]['epochs']} timed epochs after "
                f"{ring_runs[-1]['warmup_epochs']} warm-up; ringloader worker time "
                f"per image (summed over workers): read {ts['read_s'] / n * 1e6:.0f} us, "
                f"decode {ts['decode_s'] / n * 1e6:.0f} us, "
                f"transform {ts['transform_s'] / n * 1e6:.0f} us; "
                f"workers waiting for a slot {ts['slot_wait_s']:.2f} s, "
                f"trainer waiting for a batch {ts['trainer_wait_s']:.2f} s "
                f"of {ts['wall_s']:.2f} s")
        if torch_runs and ring_runs and "cpu_us_per_image" in ring_runs[0]:
            ct = statistics.median(x["cpu_us_per_image"] for x in torch_runs)
            cr = statistics.median(x["cpu_us_per_image"] for x in ring_runs)
            notes.append(
                f"{workload}: CPU time per image, trainer + workers, timed epochs: "
                f"torch {ct:,.1f} us, ringloader {cr:,.1f} us "
                f"({ct / cr:.2f}x less); load average during the runs "
                + ", ".join(f"{x['load_average']:.1f}" for x in torch_runs + ring_runs))
        if len(torch_runs) > 1 or len(ring_runs) > 1:
            paired = [b["images_per_s"] / a["images_per_s"]
                      for a, b in zip(torch_runs, ring_runs)]
            notes.append(f"{workload} rounds (images/s, torch then ringloader each round): "
                         + "; ".join(f"{fmt_rate(a['images_per_s'])} vs "
                                     f"{fmt_rate(b['images_per_s'])} ({x:.2f}x)"
                                     for a, b, x in zip(torch_runs, ring_runs, paired))
                         + f"; median of the per-round ratios {statistics.median(paired):.2f}x")
        if torch_runs and ring_runs and workload == "fashion":
            a, b = torch_runs[0]["warmup_sink"], ring_runs[0]["warmup_sink"]
            same = abs(a - b) < 1e-4 * (1 + abs(a))
            notes.append("fashion: the sum over the warm-up epoch of each batch's first "
                         "element is " + ("equal on both sides (same shuffle order, same "
                                          "values)" if same else
                                          f"different on the two sides ({a} vs {b})"))

    handoff = load(folder, "handoff-ringloader.json")
    if handoff:
        h = handoff[0]
        s, l = h["small"]["handoff"], h["large"]["handoff"]
        ratio = h["ratio_median"]
        rows.append((f"handoff: next()+drop of a READY batch, median of {s['n']} / {l['n']}",
                     f"1 MiB: {s['median_us']:.1f} us", f"64 MiB: {l['median_us']:.1f} us",
                     f"{ratio:.2f}x", "<= 1.2x", "PASS" if ratio <= 1.2 else "FAIL"))
        for key in ("small", "large"):
            x = h[key]
            notes.append(
                f"handoff {x['batch_bytes'] >> 20} MiB: next() median "
                f"{x['next']['median_us']:.1f} us (p90 {x['next']['p90_us']:.1f}), "
                f"drop median {x['drop']['median_us']:.1f} us "
                f"(p90 {x['drop']['p90_us']:.1f}), {x['ring_slots']} slots, "
                f"{x['not_ready_skipped']} not-ready batches skipped")
    rss = load(folder, "rss-ringloader.json")
    if rss:
        m = rss[0]
        growth = m["growth_kb"]
        rows.append((f"trainer VmRSS, Fashion-MNIST ({m['dataset_size']}), epoch 1 vs {m['epochs']}",
                     f"epoch 1: {m['vm_rss_kb_epoch1'] / 1024:.1f} MiB",
                     f"epoch {m['epochs']}: {m['vm_rss_kb_last'] / 1024:.1f} MiB",
                     f"{growth:+d} KiB", "no growth",
                     "PASS" if growth <= 256 else "FAIL"))
        per = m["per_epoch"]
        last_growth = max([e["epoch"] for prev, e in zip(per, per[1:])
                           if e["vm_rss_kb"] > prev["vm_rss_kb"]] or [1])
        notes.append("trainer VmRSS per epoch (KiB): " + ", ".join(
            str(e["vm_rss_kb"]) for e in per)
            + f"; last growth in epoch {last_growth}; growth epoch 1 -> "
            f"{per[-1]['epoch']}: RssAnon {per[-1]['rss_anon_kb'] - per[0]['rss_anon_kb']:+d} KiB, "
            f"RssShmem {per[-1]['rss_shmem_kb'] - per[0]['rss_shmem_kb']:+d} KiB, "
            f"RssFile {per[-1]['rss_file_kb'] - per[0]['rss_file_kb']:+d} KiB")

    header = ("workload", "torch DataLoader", "ringloader", "ratio", "target", "")
    print("Throughput rows: images/s, best of the rounds for each side (the "
          "round least disturbed by other load); every round is listed below.")
    print()
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print()
    anchor = (load(folder, "jpeg-torch-*.json") + load(folder, "fashion-torch-*.json"))
    if anchor:
        a = anchor[0]
        notes.append(f"torch side: torch {a['torch']}, torchvision {a['torchvision']}, "
                     f"Pillow {a['pillow']}, num_workers {a['num_workers']}, "
                     "persistent_workers=True; both sides 2 workers on "
                     f"{a['cpus']} cores; load average at the end "
                     + open("/proc/loadavg").read().split()[0])
    for note in notes:
        print(f"- {note}")

    profile_torch = load(folder, "profile-torch.json")
    profile_ring = load(folder, "profile-ringloader.json")
    if profile_torch and profile_ring:
        t = profile_torch[0]["cpu_us_per_image_stage"]
        r = profile_ring[0]["cpu_us_per_image_stage"]
        print()
        print(f"Per-image CPU time of the jpeg workload's stages, one thread, no loader "
              f"({profile_ring[0]['images']} images, microseconds):")
        print()
        print("| stage | torchvision / PIL | ringloader | ratio |")
        print("|---|---|---|---|")
        total_t = total_r = 0.0
        for stage, key_t, key_r in [("decode (open + convert RGB)", "decode", "decode"),
                                    ("RandomResizedCrop(224)", "rrc", "+rrc"),
                                    ("RandomHorizontalFlip", "flip", "+flip"),
                                    ("ToTensor", "totensor", "+totensor"),
                                    ("Normalize", "normalize", "+normalize")]:
            total_t += t[key_t]
            total_r += r[key_r]
            ratio = t[key_t] / r[key_r] if r[key_r] > 5 else float("nan")
            print(f"| {stage} | {t[key_t]:.0f} | {r[key_r]:.0f} | "
                  + ("-" if ratio != ratio else f"{ratio:.2f}x") + " |")
        print(f"| total | {total_t:.0f} | {total_r:.0f} | {total_t / total_r:.2f}x |")
        print()
        print("(ringloader's stages are differences of cumulative runs, so a cheap "
              "stage can show as a few microseconds either side of zero; its "
              "ToTensor and Normalize are one fused pass.)")
    tar = load(folder, "tar-shards.json")
    if tar:
        t = tar[0]
        f = t["folder_images_per_s"]
        print()
        print(f"Tar shards vs ImageFolder, same JPEG photos ({t['dataset_size']} images in "
              f"{t['shards']} shards, shuffle buffer {t['shuffle_buffer']}, "
              f"{t['num_workers']} workers, batch {t['batch_size']}, median of "
              f"{t['rounds']} rounds of {t['epochs']} epochs, warm page cache):")
        print()
        print("| source | images/s | vs ImageFolder | read us/image | indexing at construction |")
        print("|---|---|---|---|---|")
        print(f"| ImageFolder | {fmt_rate(f)} | 1.00x | "
              f"{t['folder_read_us_per_image']:.1f} | folder scan |")
        print(f"| tar shards, local | {fmt_rate(t['shards_images_per_s'])} | "
              f"{t['shards_images_per_s'] / f:.2f}x | {t['shards_read_us_per_image']:.1f} | "
              f"{t['index_s']:.3f} s (headers only) |")
        print(f"| tar shards, pipe:cat | {fmt_rate(t['pipe_images_per_s'])} | "
              f"{t['pipe_images_per_s'] / f:.2f}x | {t['pipe_read_us_per_image']:.1f} | "
              f"{t['pipe_index_s']:.3f} s (streamed once) |")
        print()
        print("rounds (images/s): folder " + ", ".join(fmt_rate(x) for x in t["folder_rounds"])
              + "; shards " + ", ".join(fmt_rate(x) for x in t["shards_rounds"])
              + "; pipe " + ", ".join(fmt_rate(x) for x in t["pipe_rounds"])
              + f"; load average {t['load_average']:.1f}")
    fidelity = load(folder, "fast-psnr.json")
    if fidelity:
        f = fidelity[0]
        print()
        print(f"Fast mode vs exact mode ({f['images']} photos, RRC(224)+flip, uint8): "
              f"PSNR mean {f['psnr_db']['mean']:.2f} dB, median {f['psnr_db']['median']:.2f}, "
              f"5th percentile {f['psnr_db']['p5']:.2f}, worst {f['psnr_db']['min']:.2f}; "
              f"max abs difference {f['max_abs_diff']}; one thread, CPU per image of the "
              f"whole pipeline: exact {f['cpu_us_per_image']['exact']:.0f} us, fast "
              f"{f['cpu_us_per_image']['fast']:.0f} us.")
    probe = load(folder, "jpeg-probe.json")
    if probe:
        p = probe[0]
        c = p["cpu_us_per_image"]
        print()
        print(f"libjpeg-turbo on the same photos ({p['images']} images, one thread, "
              f"per-image CPU): full decode {c['full']:.0f} us; Huffman decoding "
              f"alone {c['entropy_only']:.0f} us; decoding only a RandomResizedCrop "
              f"box (mean {p['mean_box_area_fraction']:.0%} of the image, 16 px "
              f"margin) {c['roi']:.0f} us ({1 - c['roi'] / c['full']:.0%} less), "
              f"its pixels differing from the full decode: "
              f"{p['roi_pixels_differing_from_full']}; "
              f"{p['half_scale_eligible']} boxes are >= 448 px on both sides "
              f"(DCT 1/2 scaling possible).")


if __name__ == "__main__":
    main()
