#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Brings onto this machine the public scripts and the package that
# python/tests/test_unchanged_variable_scripts.py runs, none of them vendored:
#   - torchvision 0.14.1's references/ (BSD-3-Clause, its LICENSE kept beside
#     them), from Debian's pytorch-vision source package: the source Debian's
#     python3-torchvision (the torchvision we test with) is built from;
#   - pycocotools from PyPI, pinned, into a --target folder;
#   - tqdm and dill from PyPI (Pytorch-NCE's example needs them), pinned.
# Stonesjtu/Pytorch-NCE's example (the text script) is on no registry: a
# checkout of the commit the test names, at $CACHE/src/pytorch-nce, is used
# where present.
# Both go to ~/.cache/ringloader ($RINGLOADER_CACHE); the tests find them
# there and skip, naming this script, without them. Safe to re-run: does
# nothing when both are present. Needs Debian's and PyPI's registries only;
# touches no system apt configuration (a private apt state in a temp dir).
set -euo pipefail
CACHE="${RINGLOADER_CACHE:-$HOME/.cache/ringloader}"
PYCOCOTOOLS_VERSION=2.0.11
TQDM_VERSION=4.70.1
DILL_VERSION=0.4.1
VISION=vision-0.14.1
mkdir -p "$CACHE/src"

if [ ! -f "$CACHE/src/$VISION/references/detection/train.py" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  mkdir -p "$work/sources.list.d" "$work/lists/partial"
  # The machine's own Debian sources, as deb-src entries.
  for f in /etc/apt/sources.list.d/*.sources; do
    sed 's/^Types: deb$/Types: deb-src/' "$f" > "$work/sources.list.d/$(basename "$f")"
  done
  apt_private=(-o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$work/sources.list.d"
               -o "Dir::State::Lists=$work/lists" -o "Dir::Cache::pkgcache=" -o "Dir::Cache::srcpkgcache=")
  apt-get "${apt_private[@]}" update -qq
  (cd "$work" && apt-get "${apt_private[@]}" source --download-only -qq "pytorch-vision=0.14.1-2" \
     || ls "$work"/pytorch-vision_0.14.1.orig.tar.gz)
  # The upstream tarball is all we need (Debian's patches touch the build).
  tar -xzf "$work/pytorch-vision_0.14.1.orig.tar.gz" -C "$CACHE/src" \
    "$VISION/references" "$VISION/LICENSE"
  echo "get_real_scripts: $CACHE/src/$VISION/references"
fi

if [ ! -d "$CACHE/pycocotools-py311/pycocotools" ]; then
  /usr/bin/python3 -m pip install -q --no-deps --target "$CACHE/pycocotools-py311" \
    "pycocotools==$PYCOCOTOOLS_VERSION"
  echo "get_real_scripts: pycocotools $PYCOCOTOOLS_VERSION in $CACHE/pycocotools-py311"
fi

if [ ! -d "$CACHE/nce-deps-py311/tqdm" ]; then
  /usr/bin/python3 -m pip install -q --no-deps --target "$CACHE/nce-deps-py311" \
    "tqdm==$TQDM_VERSION" "dill==$DILL_VERSION"
  echo "get_real_scripts: tqdm $TQDM_VERSION, dill $DILL_VERSION in $CACHE/nce-deps-py311"
fi
