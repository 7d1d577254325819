#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Installs every Debian package ringloader needs to build, test, run its
# sample and benchmarks. Safe to re-run: does nothing when all are present.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config ninja-build clang libclang-rt-14-dev
  libtorch-dev libturbojpeg0-dev libjpeg62-turbo-dev libstb-dev libopencv-dev libtbb-dev
  libgtest-dev nlohmann-json3-dev zlib1g-dev
  pybind11-dev python3-dev python3-pybind11 python3-torch python3-torchvision
  python3-numpy python3-pytest python3-skimage python3-pil python3-cloudpickle
  python3-venv python3-pip
  dataset-fashion-mnist
)

missing=()
for package in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install_deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
