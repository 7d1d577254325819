#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The GPU machine's benchmarks (issue 28, items 5 and 6), each beside its
# torch side, on the build that scripts/gpu_check.sh made there:
#   1. ringloader-gpu-bench (H2D from the pinned ring against plain
#      cudaMallocHost; a training-like loop's stall per step) and
#      bench/gpu/torch_side_gpu.py, torch's DataLoader in the same loop;
#   2. bench/node_bench.py --device cuda: own loaders against one node, for
#      trainers x workers = 1x14, 2x7, 4x3 (NODE_SHAPES);
#   3. bench/photo_speed.py at 14 workers: exact and fast mode against
#      torch's DataLoader on an ImageNet-sized folder.
# Results go to $OUT (the lent machine's return folder) when it is set.
set -uo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
BUILD=${BUILD_DIR:-build-gpu}
RESULTS=${OUT:-$BUILD/results}
mkdir -p "$RESULTS"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/$BUILD/python"
stamp() { echo "== [$(date +%T) +${SECONDS}s] $*"; }
source scripts/gpu_deps_env.sh >/dev/null || exit 1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
echo "cores: $(nproc), load: $(cut -d' ' -f1-3 /proc/loadavg)"

DATA=/usr/share/datasets/fashion-mnist
[ -d .gpu-deps/data ] && DATA="$PWD/.gpu-deps/data"
SPLIT=train; [ -f "$DATA/train-images-idx3-ubyte.gz" ] || SPLIT=t10k
stamp "ringloader-gpu-bench ($SPLIT split)"
timeout 120 "$BUILD/ringloader-gpu-bench" "$DATA/$SPLIT-images-idx3-ubyte.gz" \
  "$DATA/$SPLIT-labels-idx1-ubyte.gz" "$RESULTS/gpu-bench-ringloader.json"
stamp "torch DataLoader (pin_memory, non_blocking), same loop"
timeout 120 "$PYTHON" bench/gpu/torch_side_gpu.py "$DATA/$SPLIT-images-idx3-ubyte.gz" \
  "$DATA/$SPLIT-labels-idx1-ubyte.gz" | tee "$RESULTS/gpu-bench-torch.json"

PHOTOS=${PHOTOS:-$BUILD/photos}
for _ in $(seq 120); do [ -f "$BUILD/photos.done" ] && break; sleep 1; done
[ -f "$BUILD/photos.done" ] || RINGLOADER_PHOTO_SOURCES="$PWD/.gpu-deps/photos" \
  "$PYTHON" bench/make_photo_folder.py "$PHOTOS" --preset imagenet --classes 10 --per-class 200
for shape in ${NODE_SHAPES:-1x14 2x7 4x3}; do
  stamp "node_bench --device cuda, trainers x workers $shape"
  timeout "${NODE_TIMEOUT:-100}" "$PYTHON" bench/node_bench.py --photos "$PHOTOS" \
    --trainers "${shape%x*}" --workers-per-trainer "${shape#*x}" --epochs 3 --rounds 2 \
    --device cuda > "$RESULTS/node-$shape.json"
done
[ "${PHOTO_SPEED:-1}" = 1 ] || { stamp done; exit 0; }
stamp "photo_speed, 14 workers: torch DataLoader, exact, fast"
timeout "${PHOTO_TIMEOUT:-150}" "$PYTHON" bench/photo_speed.py --build "$BUILD" \
  --corpus "imagenet=$PHOTOS" --workers 14 --rounds 3 --batch-size 64 \
  > "$RESULTS/photo-speed-14.txt"
cat "$RESULTS/photo-speed-14.txt" | tail -3
stamp done
