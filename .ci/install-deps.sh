#!/usr/bin/env bash
# Installs the distribution packages Updraft builds and tests with, only those that are missing,
# non-interactively. Used by `make` (and so by .ci/run); safe to run again.
set -euo pipefail
packages=(
  pkg-config
  ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo   # OpenCL loader, headers, and OpenCL on the CPU
  libopenblas-dev                                           # the fast CPU path's GEMM
  libclblast-dev                                            # CLBlast, the second OpenCL GEMM engine
  libdnnl-dev                                               # oneDNN, the second CPU convolution engine (dlopen)
  libpng-dev libjpeg-dev libdeflate-dev                     # image decoding for training data
  libopenmpi-dev openmpi-bin                                # MPI: data-parallel training across hosts (mpirun)
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
echo "installing: ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "error: need root (or sudo) to install ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
