# SPDX-License-Identifier: BSD-3-Clause
"""A map-style Python dataset's first batch (issue 46 item 4): its loader
server is forked by the loader's own zygote (a fork of the trainer taken at
construction while safe, _trainer/warm_zygote.py), so it does not import
again the modules the trainer imported after ringloader (the ~2 s of
Hugging Face ``datasets`` a loader paid before its first batch; torch's
forked workers import nothing)."""
import pytest

from conftest import run_with_import_log

MAPLIB = """
import os
import torch

with open(os.environ["IMPORT_LOG"], "a") as log:
    log.write(f"{os.getpid()}\\n")


class Parents(torch.utils.data.Dataset):
    # Each sample: the worker's server, and the process that forked it.
    def __len__(self):
        return 8

    def __getitem__(self, index):
        server = os.getppid()
        with open(f"/proc/{server}/status") as status:
            zygote = int(status.read().split("PPid:")[1].split()[0])
        return index, server, zygote
"""

SCRIPT = """
import os
import sys
import ringloader
import maplib  # imported after ringloader: the trainer's zygote lacks it

persistent = sys.argv[1] == "persistent"
seeding = sys.argv[2]
loader = ringloader.DataLoader(maplib.Parents(), batch_size=4, num_workers=2,
                               persistent_workers=persistent, seeding=seeding)
epochs = [[[int(t) for t in column] for column in batch]
          for _ in range(2) for batch in loader]
print(os.getpid())
print(epochs)
"""


@pytest.mark.parametrize("persistent, seeding", [
    ("persistent", "ringloader"), ("fresh", "ringloader"), ("fresh", "torch")])
def test_no_server_imports_the_trainers_modules_again(tmp_path, persistent, seeding):
    (first, second), log = run_with_import_log(tmp_path, ("maplib.py", MAPLIB), SCRIPT,
                                               [persistent, seeding])
    trainer = int(first)
    # Imported by the trainer alone: each server used to import it again
    # while it unpickled the dataset.
    assert log.read_text().split() == [str(trainer)]
    batches = eval(second)  # noqa: S307  (our own script's printout)
    assert [index for batch in batches for index in batch[0]] == list(range(8)) * 2
    zygotes = {zygote for batch in batches for zygote in batch[2]}
    assert len(zygotes) == 1 and zygotes != {trainer}
