# SPDX-License-Identifier: BSD-3-Clause
"""ringloader-shard's re-encoding options (--max-side, --quality,
--reencode-all): photos over the limit are shrunk with their aspect kept and
read back through TarShards; everything else keeps its bytes; a photo that
does not decode stops the tool with its file named."""
import io
import os
import subprocess
import tarfile

import numpy
import pytest
from PIL import Image

import ringloader
from ringloader import transforms as T

SIZES = [(64, 48), (30, 20), (40, 90), (16, 16)]  # (width, height)


def tool():
    package = os.path.dirname(os.path.abspath(ringloader.__file__))
    # The build tree's (build/python/ringloader -> build/), or pip's (ringloader/bin/).
    for path in (os.path.join(os.path.dirname(os.path.dirname(package)), "ringloader-shard"),
                 os.path.join(package, "bin", "ringloader-shard")):
        if os.access(path, os.X_OK):
            return path
    raise AssertionError(f"ringloader-shard is neither built nor installed next to {package}")


def write_photos(root):
    rng = numpy.random.default_rng(0)
    for i, (width, height) in enumerate(SIZES):
        folder = os.path.join(root, f"class_{i % 2}")
        os.makedirs(folder, exist_ok=True)
        pixels = rng.integers(0, 256, (height, width, 3), dtype=numpy.uint8)
        Image.fromarray(pixels).save(os.path.join(folder, f"img_{i}.jpg"), quality=95)
    Image.new("RGB", (50, 50), (10, 200, 30)).save(os.path.join(root, "class_0", "flat.png"))
    return root


def run_tool(root, out_dir, *options):
    os.makedirs(out_dir, exist_ok=True)
    return subprocess.run([tool(), root, os.path.join(out_dir, "s-%02d.tar"), *options],
                          capture_output=True, text=True)


def members(shard):
    with tarfile.open(shard) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}


def originals(root):
    dataset = ringloader.datasets.ImageFolder(root)
    return [path for path, _ in dataset.samples]


def test_max_side_shrinks_only_larger_photos_and_keeps_aspect(tmp_path):
    root = write_photos(str(tmp_path / "photos"))
    result = run_tool(root, str(tmp_path / "out"), "--max-side", "32", "--quality", "80")
    assert result.returncode == 0, result.stderr
    assert "re-encoded 2 photos" in result.stdout
    written = members(str(tmp_path / "out" / "s-00.tar"))
    for n, path in enumerate(originals(root)):
        key = next(k for k in written if k.startswith(f"{n:06d}.") and not k.endswith(".cls"))
        data = written[key]
        with Image.open(path) as before:
            width, height = before.size
        if path.endswith(".png") or max(width, height) <= 32:
            assert data == open(path, "rb").read(), path  # untouched bytes
            continue
        after = Image.open(io.BytesIO(data))
        assert max(after.size) == 32, (path, after.size)
        assert abs(after.size[0] / after.size[1] - width / height) < 0.1, path


def test_shrunk_shards_load_through_tar_shards(tmp_path):
    root = write_photos(str(tmp_path / "photos"))
    assert run_tool(root, str(tmp_path / "out"), "--max-side", "24").returncode == 0
    dataset = ringloader.datasets.TarShards(str(tmp_path / "out" / "s-00.tar"),
                                            T.Compose([T.Resize([8, 8]), T.PILToTensor()]))
    images, labels = next(iter(ringloader.DataLoader(dataset, batch_size=5)))
    assert images.shape == (5, 3, 8, 8)
    assert labels.tolist() == ringloader.datasets.ImageFolder(root).targets


def test_reencode_all_changes_every_jpeg(tmp_path):
    root = write_photos(str(tmp_path / "photos"))
    result = run_tool(root, str(tmp_path / "out"), "--reencode-all", "--quality", "50")
    assert result.returncode == 0, result.stderr
    assert "re-encoded 4 photos" in result.stdout


def test_without_options_bytes_are_copied(tmp_path):
    root = write_photos(str(tmp_path / "photos"))
    assert run_tool(root, str(tmp_path / "out")).returncode == 0
    written = members(str(tmp_path / "out" / "s-00.tar"))
    for n, path in enumerate(originals(root)):
        ext = os.path.splitext(path)[1]
        assert written[f"{n:06d}{ext}"] == open(path, "rb").read()


def test_a_photo_that_does_not_decode_is_named(tmp_path):
    root = write_photos(str(tmp_path / "photos"))
    broken = os.path.join(root, "class_1", "broken.jpg")
    with open(broken, "wb") as f:
        f.write(b"\xff\xd8\xff\xe0" + b"\x00" * 40)
    result = run_tool(root, str(tmp_path / "out"), "--max-side", "32")
    assert result.returncode == 1
    assert "broken.jpg" in result.stderr


@pytest.mark.parametrize("options", [["--max-side", "0"], ["--quality", "101"],
                                     ["--max-side"]])
def test_bad_options_are_refused(tmp_path, options):
    root = write_photos(str(tmp_path / "photos"))
    result = run_tool(root, str(tmp_path / "out"), *options)
    assert result.returncode == 2
    assert "usage" in result.stderr
