#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Makes, or reuses, the environments bench/peers runs in, and prints the
# peers' Python. Everything is cached under $RINGLOADER_CACHE
# (~/.cache/ringloader): a rerun with the caches in place downloads nothing.
# - the torch 2.x venv of scripts/torch2_env.sh (torch 2.14.1 + torchvision
#   0.29.2), with ringloader pip-installed into it (done here only if missing);
# - venv-peers-py312: the peers (requirements-peers.txt, exact pins, all
#   --no-deps) on top of the torch venv, seen through a .pth file, so no
#   peer can bring another torch (Mosaic Streaming, which pins numpy<2.2,
#   gets only the packages it imports: see requirements-peers.txt); FFCV
#   built from its sdist (needs libopencv-dev, libturbojpeg0-dev); SPDL
#   needs FFmpeg's shared libraries (Debian 12: libavdevice59 and friends);
# - venv-pillow-simd-py312: the same torch venv with Pillow-SIMD built from
#   its sdist (AVX2) shadowing Pillow, for the torch-simd row.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
SOURCE="$(cd "$HERE/../.." && pwd)"
CACHE="${RINGLOADER_CACHE:-$HOME/.cache/ringloader}"
WHEELS="$CACHE/wheelhouse-peers"
PEERS="${RINGLOADER_PEERS_VENV:-$CACHE/venv-peers-py312}"
SIMD="${RINGLOADER_SIMD_VENV:-$CACHE/venv-pillow-simd-py312}"
TORCHVENV=$("$SOURCE/scripts/torch2_env.sh")
BASE=$("$TORCHVENV/bin/python" -c 'import sys; print(sys._base_executable)')
SITE="$TORCHVENV/lib/python3.12/site-packages"
log() { echo "peers setup: $*" >&2; }

if ! (cd / && "$TORCHVENV/bin/python" -c 'import ringloader') 2>/dev/null; then
  log "installing ringloader into $TORCHVENV (pip install --no-build-isolation .)"
  (cd "$SOURCE" && nice -n 19 "$TORCHVENV/bin/pip" install -q --no-build-isolation \
    --no-deps --no-cache-dir .) >&2
fi

apt_missing=()
for p in libavdevice59 libavfilter8 libavformat59 libavcodec59 libswscale6 \
         libopencv-dev libturbojpeg0-dev libjpeg-dev zlib1g-dev pkg-config; do
  dpkg -s "$p" >/dev/null 2>&1 || apt_missing+=("$p")
done
if [ ${#apt_missing[@]} -gt 0 ]; then
  log "apt-get install ${apt_missing[*]}"
  apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
    --no-install-recommends "${apt_missing[@]}" >&2
fi

peers_ready() {
  [ -x "$PEERS/bin/python" ] && (cd / && "$PEERS/bin/python" - <<'PY') >/dev/null 2>&1
import torch, torchvision, torchdata.nodes, webdataset, spdl.io, nvidia.dali, litdata, ffcv
import streaming
import ringloader
assert torch.__version__.startswith("2.14.1"), torch.__version__
PY
}

if ! peers_ready; then
  log "making $PEERS"
  mkdir -p "$WHEELS"
  # Only what the wheelhouse lacks crosses the network.
  nice -n 19 "$BASE" -m pip download -q --no-deps --dest "$WHEELS" --find-links "$WHEELS" \
    -r "$HERE/requirements-peers.txt" >&2
  rm -rf "$PEERS"
  "$BASE" -m venv "$PEERS"
  # addsitedir (not a bare path) so the torch venv's own .pth files run too
  # (setuptools' distutils shim, which FFCV imports on Python 3.12).
  echo "import site; site.addsitedir('$SITE')" > "$PEERS/lib/python3.12/site-packages/zz_torch_venv.pth"
  nice -n 19 "$PEERS/bin/pip" install -q --no-index --no-deps --find-links "$WHEELS" \
    -r "$HERE/requirements-peers.txt" >&2
  if ! ls "$WHEELS"/ffcv-1.0.2-*.whl >/dev/null 2>&1; then
    nice -n 19 "$BASE" -m pip download -q --no-deps --no-binary :all: --dest "$WHEELS" \
      --find-links "$WHEELS" ffcv==1.0.2 >&2
    nice -n 19 "$PEERS/bin/pip" wheel -q --no-deps --no-build-isolation --no-index \
      --find-links "$WHEELS" --wheel-dir "$WHEELS" ffcv==1.0.2 >&2
  fi
  nice -n 19 "$PEERS/bin/pip" install -q --no-index --no-deps --find-links "$WHEELS" ffcv==1.0.2 >&2
  peers_ready || { log "$PEERS does not import every peer"; exit 1; }
fi

if ! (cd / && "$SIMD/bin/python" -c 'import PIL, torchvision; assert PIL.__version__.endswith(".post0")') 2>/dev/null; then
  log "making $SIMD (Pillow-SIMD from source)"
  if ! ls "$WHEELS"/pillow_simd-12.1.1.post0-*.whl >/dev/null 2>&1; then
    nice -n 19 "$BASE" -m pip download -q --no-deps --no-binary :all: --dest "$WHEELS" \
      --find-links "$WHEELS" pillow-simd==12.1.1.post0 >&2
  fi
  rm -rf "$SIMD"
  "$BASE" -m venv "$SIMD"
  echo "import site; site.addsitedir('$SITE')" > "$SIMD/lib/python3.12/site-packages/zz_torch_venv.pth"
  if ! ls "$WHEELS"/pillow_simd-12.1.1.post0-*.whl >/dev/null 2>&1; then
    CC="cc -mavx2" nice -n 19 "$SIMD/bin/pip" wheel -q --no-deps --no-build-isolation \
      --no-index --find-links "$WHEELS" --wheel-dir "$WHEELS" pillow-simd==12.1.1.post0 >&2 ||
      log "Pillow-SIMD did not build: the torch-simd row is left out"
  fi
  nice -n 19 "$SIMD/bin/pip" install -q --no-index --no-deps --find-links "$WHEELS" \
    pillow-simd==12.1.1.post0 >&2 || true
fi
echo "$PEERS"
