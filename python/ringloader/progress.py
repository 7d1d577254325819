# SPDX-License-Identifier: BSD-3-Clause
"""A tqdm-style progress line for any loader, with ringloader's own figures
(images/s and the trainer's stall share). No dependency.

    for images, labels in ringloader.progress(loader, desc="epoch 3"):
        ...
"""
import sys
import time

__all__ = ["progress"]


def progress(loader, desc="", stream=None, every_s=0.2):
    """Yields the loader's batches, redrawing one status line on `stream`
    (stderr by default; plain lines when it is not a terminal)."""
    stream = stream or sys.stderr
    interactive = getattr(stream, "isatty", lambda: False)()
    total = len(loader) if hasattr(loader, "__len__") else None
    stats = getattr(loader, "stats", None)
    stall_before = (stats() or {}).get("trainer_wait_s", 0.0) if stats else 0.0
    start = last = time.perf_counter()
    done = images = 0

    def line(final=False):
        elapsed = max(time.perf_counter() - start, 1e-9)
        stall = ((stats() or {}).get("trainer_wait_s", 0.0) - stall_before) if stats else 0.0
        count = f"{done}/{total}" if total is not None else f"{done}"
        text = (f"{desc + ': ' if desc else ''}{count} batches, "
                f"{images / elapsed:.0f} img/s, stall {100 * stall / elapsed:.0f}%")
        if interactive:
            stream.write("\r" + text + ("\n" if final else ""))
        elif final:
            stream.write(text + "\n")
        stream.flush()

    for batch in loader:
        first = batch[0] if isinstance(batch, (list, tuple)) else batch
        images += int(getattr(first, "shape", [1])[0])
        done += 1
        yield batch
        now = time.perf_counter()
        if now - last >= every_s:
            last = now
            line()
    line(final=True)
