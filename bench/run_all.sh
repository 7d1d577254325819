#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Runs ringloader and the torch side (torch.utils.data.DataLoader, bench/torch_side.py) side by
# side, on the same data, in one run, and prints the table of measured figures.
#
#   bench/run_all.sh [BUILD_DIR] [--quick] [--repeat N]
#
# BUILD_DIR (default ./build) must already hold ringloader-bench (and, for
# the tar shard figures, ringloader-tar-bench and ringloader-shard): this
# script builds nothing (cmake --build BUILD_DIR --target ringloader-bench
# ringloader-tar-bench).
# --quick: small data and few epochs (1-2 minutes) to check that it all works.
# --repeat N: alternate torch / ringloader N times per workload and report
#   the median of each side (default 2, 1 with --quick), which evens out
#   other load on a shared machine.
# Data go to BUILD_DIR/bench-data (cached), results (JSON per run and
# results.md) to BUILD_DIR/bench-results.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BUILD=./build
QUICK=0
REPEAT=0  # 0: 1 with --quick, else 2
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --repeat) REPEAT="$2"; shift ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) BUILD="$1" ;;
  esac
  shift
done

PY=/usr/bin/python3   # the Python with torch / torchvision / Pillow
BENCH="$BUILD/ringloader-bench"
if [[ ! -x "$BENCH" ]]; then
  echo "error: $BENCH not found; build it first:" >&2
  echo "  cmake --build $BUILD --target ringloader-bench" >&2
  exit 1
fi
if ! "$PY" -c 'import torch, torchvision, PIL' 2>/dev/null; then
  echo "error: $PY lacks torch / torchvision / Pillow" >&2
  exit 1
fi

FASHION=/usr/share/datasets/fashion-mnist
DATA="$BUILD/bench-data"
OUT="$BUILD/bench-results"
mkdir -p "$DATA" "$OUT"
rm -f "$OUT"/*.json

if [[ $QUICK == 1 ]]; then
  PHOTO_CLASSES=10; PHOTO_PER_CLASS=30
  JPEG_EPOCHS=1
  FASHION_SET=t10k; FASHION_EPOCHS=2; FASHION_RING_EPOCHS=20
  HANDOFF_ROUNDS=5
  PROFILE_IMAGES=100
  RSS_SET=t10k; RSS_EPOCHS=10
else
  PHOTO_CLASSES=10; PHOTO_PER_CLASS=200
  JPEG_EPOCHS=3
  FASHION_SET=train; FASHION_EPOCHS=2; FASHION_RING_EPOCHS=20
  HANDOFF_ROUNDS=20
  PROFILE_IMAGES=400
  RSS_SET=train; RSS_EPOCHS=10
fi
if [[ $REPEAT == 0 ]]; then
  if [[ $QUICK == 1 ]]; then REPEAT=1; else REPEAT=2; fi
fi
FASHION_IMAGES="$FASHION/$FASHION_SET-images-idx3-ubyte.gz"
FASHION_LABELS="$FASHION/$FASHION_SET-labels-idx1-ubyte.gz"
PHOTOS="$DATA/photos-${PHOTO_CLASSES}x${PHOTO_PER_CLASS}"

echo "== machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== data"
"$PY" "$HERE/make_photo_folder.py" "$PHOTOS" --classes "$PHOTO_CLASSES" \
  --per-class "$PHOTO_PER_CLASS"

run() {  # run NAME CMD...: JSON on stdout into $OUT/NAME.json, stderr shown
  local name="$1"; shift
  echo "-- $name: $*"
  "$@" > "$OUT/$name.json"
}

for ((r = 1; r <= REPEAT; r++)); do
  echo "== jpeg (round $r/$REPEAT)"
  run "jpeg-torch-$r" "$PY" "$HERE/torch_side.py" jpeg --root "$PHOTOS" \
    --epochs "$JPEG_EPOCHS"
  run "jpeg-ringloader-$r" "$BENCH" jpeg --root "$PHOTOS" --epochs "$JPEG_EPOCHS"
  run "jpeg-fast-ringloader-$r" "$BENCH" jpeg --mode fast --root "$PHOTOS" \
    --epochs "$JPEG_EPOCHS"
  echo "== fashion-mnist (round $r/$REPEAT)"
  run "fashion-torch-$r" "$PY" "$HERE/torch_side.py" fashion \
    --images "$FASHION_IMAGES" --labels "$FASHION_LABELS" --epochs "$FASHION_EPOCHS"
  # ringloader runs more epochs of the same data so that its timed window
  # (an epoch takes it ~0.1 s) is long enough to time reliably.
  run "fashion-ringloader-$r" "$BENCH" fashion --images "$FASHION_IMAGES" \
    --labels "$FASHION_LABELS" --epochs "$FASHION_RING_EPOCHS"
done
echo "== per-stage CPU profile of the jpeg workload (one thread, no loader)"
run profile-torch "$PY" "$HERE/torch_side.py" profile --root "$PHOTOS" --limit "$PROFILE_IMAGES"
run profile-ringloader "$BENCH" profile --root "$PHOTOS" --limit "$PROFILE_IMAGES"
if [[ -x "$BUILD/ringloader-jpeg-probe" ]]; then
  run jpeg-probe "$BUILD/ringloader-jpeg-probe" --limit "$PROFILE_IMAGES" "$PHOTOS"/*/*.jpg
fi
if [[ -x "$BUILD/ringloader-fast-psnr" ]]; then
  run fast-psnr "$BUILD/ringloader-fast-psnr" --limit "$PROFILE_IMAGES" "$PHOTOS"/*/*.jpg
fi
echo "== handoff"
run handoff-ringloader "$BENCH" handoff --images "$FASHION/t10k-images-idx3-ubyte.gz" \
  --labels "$FASHION/t10k-labels-idx1-ubyte.gz" --rounds "$HANDOFF_ROUNDS"
echo "== rss"
run rss-ringloader "$BENCH" rss --images "$FASHION/$RSS_SET-images-idx3-ubyte.gz" \
  --labels "$FASHION/$RSS_SET-labels-idx1-ubyte.gz" --epochs "$RSS_EPOCHS"

echo "== tar shards vs ImageFolder (same photos)"
if [[ -x "$BUILD/ringloader-tar-bench" && -x "$BUILD/ringloader-shard" ]]; then
  SHARDS="$PHOTOS-shards"
  if [[ ! -f "$SHARDS/photos-0000.tar" ]]; then
    mkdir -p "$SHARDS"
    # --max-count: 10 shards of the folder; --shuffle mixes classes across shards.
    "$BUILD/ringloader-shard" "$PHOTOS" "$SHARDS/photos-%04d.tar" \
      --max-count $(( (PHOTO_CLASSES * PHOTO_PER_CLASS + 9) / 10 )) --shuffle --seed 0
  fi
  LAST=$(( $(ls "$SHARDS"/photos-*.tar | wc -l) - 1 ))
  run tar-shards "$BUILD/ringloader-tar-bench" --root "$PHOTOS" \
    --shards "$SHARDS/photos-{0000..$(printf %04d $LAST)}.tar" \
    --epochs "$JPEG_EPOCHS" --rounds "$REPEAT"
fi

echo "== ImageNet-sized photos through the Python face (torch / exact / fast)"
INET="$DATA/imagenet-${PHOTO_CLASSES}x${PHOTO_PER_CLASS}"
"$PY" "$HERE/make_photo_folder.py" "$INET" --preset imagenet --classes "$PHOTO_CLASSES" \
  --per-class "$PHOTO_PER_CLASS"
"$PY" "$HERE/photo_speed.py" --build "$BUILD" --rounds "$REPEAT" \
  --corpus "imagenet=$INET" --corpus "uniform=$PHOTOS" | tee "$OUT/photo_speed.txt"

"$PY" "$HERE/report.py" "$OUT" | tee "$OUT/results.md"
