# SPDX-License-Identifier: BSD-3-Clause
"""The node loader's CUDA IPC lanes (issue 28, item 4), on one GPU: 1, 2 and
4 trainer processes get byte for byte what a plain DataLoader over the
node's order makes, with each batch behind a long kernel; a node killed
while it copies makes trainers raise NodeError, never hang; a node that ends
while trainers hold their last batches neither crashes them nor changes
those batches' bytes. Every test here needs a GPU."""
import json
import signal
import threading
import time

import pytest

import ringloader
from node_helpers import gpu, _name, _dataset, _python, _reference, _node_order, _run_trainers, _check_split

pytestmark = gpu


@pytest.mark.parametrize("trainers", [1, 2, 4])
def test_cuda_ipc_lanes_match_host_lanes_under_slow_consumers(image_folder, trainers):
    """Trainer processes on one GPU, each batch behind a long kernel: a slot
    overwritten before its consumer ran would change the sums."""
    name = _name(f"ipc{trainers}")
    with ringloader.NodeLoader(_dataset(image_folder), batch_size=4, shuffle=True,
                               num_workers=2, trainers=trainers, name=name, seed=7,
                               epochs=3, lane_slots=2, device="cuda",
                               devices=[0] * trainers) as node:
        node.start()
        results = _run_trainers(
            name, trainers, epochs=3,
            consume="torch.cuda._sleep(20_000_000); images = images * 1.0")
    assert all(r["device"] == "cuda:0" for r in results)
    expected = _reference(image_folder, lambda e: _node_order(24, trainers, 4, e), 3, 4)
    _check_split(results, expected, trainers)


def test_a_cuda_node_killed_while_it_copies_fails_the_trainer_at_once(image_folder):
    """Big batches keep the node's copy stream busy while this trainer takes
    them as fast as they come, so the SIGKILL lands during copies."""
    name = _name("cuda-killed")
    node = _python(f"""
        import torchvision.transforms as T, ringloader
        data = ringloader.datasets.ImageFolder({image_folder!r},
                                               T.Compose([T.Resize((512, 512)), T.ToTensor()]))
        node = ringloader.NodeLoader(data, batch_size=8, num_workers=2, name="{name}",
                                     epochs=1000, lane_slots=2, device="cuda")
        print("serving", flush=True)
        node.serve()
    """)
    taken, outcome = [], {}

    def consume():
        try:
            loader = ringloader.DataLoader(attach=name, connect_timeout=60)
            for epoch in range(1000):
                loader.set_epoch(epoch)
                for images, _ in loader:
                    taken.append(float(images[0, 0, 0, 0]))
        except BaseException as error:  # noqa: BLE001 - the test looks at it
            outcome["error"] = error
        outcome["ended"] = time.monotonic()

    try:
        assert node.stdout.readline().strip() == "serving"
        trainer = threading.Thread(target=consume, daemon=True)
        trainer.start()
        deadline = time.monotonic() + 60
        while len(taken) < 20 and trainer.is_alive() and time.monotonic() < deadline:
            time.sleep(0.001)
        assert len(taken) >= 20, outcome
        node.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        node.wait()
        trainer.join(timeout=15)
        assert not trainer.is_alive(), "the trainer hangs on a killed node"
    finally:
        node.kill()
        node.wait()
    assert isinstance(outcome.get("error"), ringloader.NodeError), outcome
    assert "died" in str(outcome["error"])
    assert outcome["ended"] - killed < 5


TRAINER_HOLDING = """
    import json, sys, torch, ringloader
    loader = ringloader.DataLoader(attach="{name}", trainer={rank}, connect_timeout=60)
    held = []
    for images, labels in loader:
        held = (held + [(images, labels, float(images.double().sum()))])[-2:]
    print("holding", flush=True)
    sys.stdin.readline()
    print(json.dumps([[taken, float(x.double().sum()), y.tolist()] for x, y, taken in held]),
          flush=True)
"""

NODE_ENDING = """
    import sys, time, torchvision.transforms as T, ringloader
    data = ringloader.datasets.ImageFolder({folder!r},
                                           T.Compose([T.RandomResizedCrop(24), T.ToTensor()]))
    node = ringloader.NodeLoader(data, batch_size=4, num_workers=2, trainers=2, name="{name}",
                                 epochs=1, lane_slots=2, device="cuda", devices=[0, 0],
                                 cuda_release_timeout={release_timeout})
    print("serving", flush=True)
    node.serve()
    sys.stdin.readline()
    started = time.monotonic()
    node.close()
    print(f"closed {{time.monotonic() - started:.2f}}", flush=True)
"""


@pytest.mark.parametrize("node_exits_first", [False, True])
def test_a_node_ending_while_cuda_trainers_hold_their_last_batches(image_folder,
                                                                   node_exits_first):
    """Both trainers hold their lane's last two batches (on the GPU, mapped
    from the node) while the node closes: either it waits for them to let go
    (release timeout 30 s), or it gives up after 0.5 s and its process exits
    before they read their batches again. Neither crashes and the bytes stay."""
    name = _name(f"cuda-ending-{int(node_exits_first)}")
    node = _python(NODE_ENDING.format(folder=image_folder, name=name,
                                      release_timeout=0.5 if node_exits_first else 30))
    trainers = []
    try:
        assert node.stdout.readline().strip() == "serving"
        trainers = [_python(TRAINER_HOLDING.format(name=name, rank=rank)) for rank in (0, 1)]
        for trainer in trainers:
            assert trainer.stdout.readline().strip() == "holding", trainer.stderr.read()
        node.stdin.write("end\n")
        node.stdin.flush()
        if node_exits_first:
            assert node.wait(timeout=30) == 0, node.stderr.read()
        for trainer in trainers:
            trainer.stdin.write("check\n")
            trainer.stdin.flush()
        for trainer in trainers:
            out, err = trainer.communicate(timeout=60)
            assert trainer.returncode == 0, err
            held = json.loads(out.strip().splitlines()[-1])
            assert len(held) == 2
            for taken, now, _ in held:
                assert now == taken, "a held batch changed after the node ended"
        out, err = node.communicate(timeout=60)
        assert node.returncode == 0, err
        closed = float(out.split("closed")[-1])
        assert closed < (2 if node_exits_first else 30)
    finally:
        for process in [node] + trainers:
            if process.poll() is None:
                process.kill()
                process.wait()
