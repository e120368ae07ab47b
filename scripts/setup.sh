#!/usr/bin/env bash
# Installs every Debian 12 package gradscope needs. Idempotent: when all are present it only checks.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config zlib1g-dev
  libopenblas0-pthread
  libboost-math-dev
  libhdf5-dev hdf5-tools
  hdf5-filter-plugin hdf5-filter-plugin-blosc-serial python3-hdf5plugin
  libtorch-dev libgloo-dev
  qt6-base-dev libqcustomplot-dev libqcustomplot2.1-qt6
  libcli11-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libfftw3-dev
  dataset-fashion-mnist
  python3 python3-numpy python3-scipy python3-h5py
  python3-dev python3-torch python3-torchvision pybind11-dev python3-pytest
  python3-pandas python3-matplotlib
  libssl-dev
  clang libfuzzer-14-dev libclang-rt-14-dev
  clang-format black mypy
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
