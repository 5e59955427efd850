#!/usr/bin/env bash
# Installs every Debian package the build, the tests and the demo need.
# Idempotent and quiet when everything is already there.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config git
  xz-utils ninja-build       # scripts/device_kit.sh: packs the GPU kit with xz, builds it with ninja
  ccache                     # the pip tests: the build without UCX reuses the one with it
  libgtest-dev libgmock-dev
  libboost-program-options-dev
  libopenblas-openmp-dev libhwloc-dev nlohmann-json3-dev zlib1g-dev libssl-dev
  libxrt-dev                 # XRT native API (the xrt driver); no FPGA needed to build
  libucx-dev ucx-utils       # transport, ucx_perftest for benchmarks
  ocl-icd-opencl-dev opencl-c-headers pocl-opencl-icd clinfo  # the opencl driver; PoCL runs it on the CPU
  dataset-fashion-mnist      # the demo's default data
  libsvm-tools               # LIBSVM svm-train/svm-predict: the SVM peer
  openmpi-bin                # mpirun: accel kmeans|svm-train --distributed under a launcher (tests)
  python3 python3-venv       # benchmark scripts (their own virtualenv)
  python3-pytest python3-sklearn  # tests/python: accel against LIBSVM on scikit-learn's datasets
  pybind11-dev python3-dev python3-numpy  # the Python module accel._accel
  python3-torch              # tests/python: the PyTorch DDP hook (CPU, gloo)
  python3-dask python3-distributed python3-pandas  # accel.dask: k-means on a dask.distributed cluster
  python3-pyflakes           # lint.pyflakes: every Python file of the project
  time                       # cluster.pull: each worker's peak memory (GNU time's %M)
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup.sh: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
echo "setup.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
