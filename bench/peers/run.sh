#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The peers bench, one command (docs/peers.md):
#   bench/peers/run.sh [--rounds 3] [--peers torch,dali-cpu,...]
# 1. environments (setup.sh: torch 2.14.1 venv with ringloader, the peers'
#    venv, the Pillow-SIMD venv; cached under ~/.cache/ringloader);
# 2. data, cached: the ImageNet-sized folder (make_photo_folder.py --preset
#    imagenet, 10 x 200 photos), the same photos as 16 tar shards
#    (ringloader-shard, byte-identical JPEGs), shards re-encoded at max side
#    256 / q90, LitData chunks, Mosaic MDS shards and FFCV .beton files
#    (prepare.py);
# 3. bench.py: every peer in a fresh interpreter, rounds interleaved.
# Results: $RINGLOADER_CACHE/peers-data/results-<date>.jsonl and the table.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
SOURCE="$(cd "$HERE/../.." && pwd)"
CACHE="${RINGLOADER_CACHE:-$HOME/.cache/ringloader}"
DATA="$CACHE/peers-data"
PY=$("$HERE/setup.sh")/bin/python
SIMD="${RINGLOADER_SIMD_VENV:-$CACHE/venv-pillow-simd-py312}/bin/python"
SHARD=$("$PY" -c 'import os, ringloader; print(os.path.join(os.path.dirname(ringloader.__file__), "bin", "ringloader-shard"))')
mkdir -p "$DATA"
# Debian's python3-skimage holds the source photographs.
nice -n 19 /usr/bin/python3 "$SOURCE/bench/make_photo_folder.py" "$DATA/imagenet-10x200" \
  --preset imagenet --classes 10 --per-class 200 >&2
make_shards() {  # OUT_DIR [ringloader-shard options]
  local out="$1"; shift
  [ -f "$out.done" ] && return
  rm -rf "$out"; mkdir -p "$out"
  nice -n 19 "$SHARD" "$DATA/imagenet-10x200" "$out/train-%06d.tar" --max-count 125 \
    --shuffle --seed 0 "$@" >&2
  touch "$out.done"
}
make_shards "$DATA/shards"
make_shards "$DATA/shards-256-q90" --max-side 256 --quality 90 --reencode-all
nice -n 19 "$PY" "$HERE/prepare.py" "$DATA/imagenet-10x200" "$DATA" 2>&1 |
  grep '^prepare:' >&2 || true
OUT="$DATA/results-$(date -u +%Y%m%dT%H%M%SZ).jsonl"
echo "peers: results to $OUT" >&2
"$PY" "$HERE/bench.py" --data "$DATA" --python "torch-simd=$SIMD" --out "$OUT" "$@"
