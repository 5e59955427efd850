#!/usr/bin/env bash
# The GPU check: runs on a bare GPU machine from the kit scripts/device_kit.sh
# packed (device-kit/), in at most 8 minutes, and writes its results to $OUT
# (results.json, results.md, and each step's log under logs/):
#   devices       accel devices --json
#   conformance   the four conformance suites and unit_topk's device-resident
#                 top-k, every case required to run on cuda
#   memcheck      compute-sanitizer memcheck over their device cases
#   bench         accel bench-kernels, cuda against the cpu (Fashion-MNIST
#                 K = 256; 1M x 128 K = 1024; top-k passes of 16M and 256M floats)
#   topk_cli      accel topk of 16M and 256M floats at 0.1% on cuda, end to end
#   peers         the same work in PyTorch on the same GPU (torch.topk, a
#                 matmul + argmin Lloyd step, torch.sparse.mm RBF rows) and
#                 the card's read bandwidth
#   ddp           the DDP hook on CUDA tensors, 2 ranks, against the CPU path
#
#   scripts/device_check.sh [--kit DIR] [--out DIR] [--pack]
#   scripts/device_check.sh --cpu-only [--kit DIR] [--out DIR]   the same steps
#       on the cpu at small sizes (CI runs this so the kit cannot rot unseen)
#
# Exit status: 0 when every step passed, 1 when a step failed, 2 when the
# machine cannot run the kit at all (no GPU, a wrong driver, a missing
# library, an old glibc), with a one-line reason.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
KIT_SRC="$ROOT/device-kit"
OUTDIR="${OUT:-$ROOT/device-check-out}"
CPU_ONLY=0
PACK=0  # --pack: leave only results.json, results.md and logs.tar.gz (everything else)
BUDGET=${ACCEL_CHECK_SECONDS:-470}  # the whole check, under the issue's 8 minutes
while [ $# -gt 0 ]; do
  case "$1" in
    --kit) KIT_SRC="$2"; shift 2 ;;
    --out) OUTDIR="$2"; shift 2 ;;
    --cpu-only) CPU_ONLY=1; shift ;;
    --pack) PACK=1; shift ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "device_check.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
START=$(date +%s)
die() { echo "device_check.sh: $*" >&2; mkdir -p "$OUTDIR" && echo "{\"refused\": \"$*\"}" >"$OUTDIR/results.json"; exit 2; }

[ -f "$KIT_SRC/kit.tar.xz" ] || die "no kit at $KIT_SRC (build it with scripts/device_kit.sh)"
mkdir -p "$OUTDIR/logs" || die "cannot write $OUTDIR"
OUTDIR="$(cd "$OUTDIR" && pwd)"
KIT="$(mktemp -d /tmp/accel-kit.XXXXXX)"
trap 'rm -rf "$KIT"' EXIT
tar -C "$KIT" -xJf "$KIT_SRC/kit.tar.xz" || die "cannot unpack $KIT_SRC/kit.tar.xz (tar with xz)"
cp "$KIT_SRC/manifest.json" "$OUTDIR/kit-manifest.json"

# --- preflight: refuse with one line what cannot work -------------------------
PY="${ACCEL_PYTHON:-python3}"  # the machine's Python with PyTorch
command -v "$PY" >/dev/null || die "no python3 on PATH"
need_glibc=$("$PY" -c "import json; print(json.load(open('$KIT_SRC/manifest.json'))['glibc_needed'])")
have_glibc=$(ldd --version 2>/dev/null | head -1 | grep -o '[0-9]*\.[0-9]*$')
newer() { [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | tail -1)" = "$1" ]; }  # $1 >= $2
newer "$have_glibc" "$need_glibc" || die "glibc $have_glibc here, the kit needs $need_glibc"
export LD_LIBRARY_PATH="$KIT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# GCC's runtime: the machine's own where it is new enough (a module
# rebuilt here by a newer g++ needs the newer one), else the kit's where
# the machine's glibc can load it.
gcc_glibc=$("$PY" -c "import json; print(json.load(open('$KIT_SRC/manifest.json'))['glibc_needed_by_lib_gcc'])")
glibcxx=$("$PY" -c "import json; print(json.load(open('$KIT_SRC/manifest.json'))['glibcxx_needed'])")
sys_stdcxx=$(/sbin/ldconfig -p 2>/dev/null | awk '/libstdc\+\+\.so\.6 .*x86-64/ {print $NF; exit}')
if [ -n "$sys_stdcxx" ] && grep -qa "GLIBCXX_$glibcxx" "$sys_stdcxx"; then
  :  # the machine's libstdc++ and libgcc_s
elif newer "$have_glibc" "$gcc_glibc"; then
  LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$KIT/lib/gcc"
else
  die "the machine's libstdc++ lacks GLIBCXX_$glibcxx and its glibc $have_glibc cannot load the kit's (needs $gcc_glibc)"
fi
missing=$(ldd "$KIT/bin/accel" "$KIT/lib/libaccel.so.0" 2>&1 | grep 'not found' | sort -u | head -3 | tr -s ' \t\n' ' ')
[ -z "$missing" ] || die "missing libraries: $missing"
if [ $CPU_ONLY = 0 ]; then
  command -v nvidia-smi >/dev/null || die "no nvidia-smi: no NVIDIA driver on this machine"
  gpu=$(timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)
  [ $? -eq 0 ] && [ -n "$gpu" ] && ! echo "$gpu" | grep -qi "fail\|error" || die "nvidia-smi: ${gpu:-no answer}"
  # cuBLAS is opened at first use (kernels_cuda/cublas_loader.cpp): the
  # toolkit's, else the one PyTorch's wheels carry (ACCEL_CUBLAS names it).
  nv=$("$PY" -c "import nvidia, os; print(' '.join(nvidia.__path__))" 2>/dev/null)
  cublas=$(find /usr/local/cuda/lib64/ /usr/local/cuda/targets/x86_64-linux/lib/ $nv -maxdepth 4 \
             -name 'libcublas.so.*' 2>/dev/null | sort -V | grep 'so\.13' | head -1)
  [ -n "$cublas" ] || cublas=$(find /usr/local/cuda*/ $nv -maxdepth 5 -name 'libcublas.so.*' 2>/dev/null | sort -V | tail -1)
  if [ -n "$cublas" ]; then
    export ACCEL_CUBLAS="$cublas"
    LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$(dirname "$cublas")"  # its libcublasLt beside it
  fi
  SANITIZER=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
else
  gpu="none (--cpu-only)"
fi
export ACCEL_BIN="$KIT/bin/accel"
export PYTHONPATH="$KIT/python${PYTHONPATH:+:$PYTHONPATH}"
export OMP_WAIT_POLICY=passive
FMNIST="$KIT_SRC/fashion-mnist"
echo "{\"gpu\": \"$gpu\", \"cublas\": \"${ACCEL_CUBLAS:-}\", \"glibc\": \"$have_glibc\", \"cpu_only\": $CPU_ONLY, \"date\": \"$(date -u +%FT%TZ)\", \"host_cpu\": \"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')\", \"cores\": $(nproc)}" >"$OUTDIR/machine.json"

# --- steps ---------------------------------------------------------------------
# step NAME SECONDS CMD...: runs CMD under a timeout (never past the budget),
# its output in logs/NAME.log, and a line in steps.jsonl.
: >"$OUTDIR/steps.jsonl"
failed=0
step() {
  local name=$1 limit=$2
  shift 2
  # ACCEL_CHECK_ONLY="peers conformance_topk_resident": a rerun of a few
  # steps after a fix, when little device time is left.
  if [ -n "${ACCEL_CHECK_ONLY:-}" ] && ! [[ " $ACCEL_CHECK_ONLY " == *" $name "* ]]; then
    return
  fi
  local left=$((BUDGET - ($(date +%s) - START) - 10))
  [ "$limit" -gt "$left" ] && limit=$left
  if [ "$limit" -le 5 ]; then
    echo "{\"step\": \"$name\", \"rc\": null, \"seconds\": 0, \"skipped\": \"out of time\"}" >>"$OUTDIR/steps.jsonl"
    failed=1
    return
  fi
  local t0 t1 rc secs
  t0=$(date +%s.%N)
  timeout -k 5 "$limit" "$@" >"$OUTDIR/logs/$name.log" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  secs=$(awk "BEGIN { printf \"%.2f\", $t1 - $t0 }")
  echo "{\"step\": \"$name\", \"rc\": $rc, \"seconds\": $secs, \"limit\": $limit, \"timed_out\": $([ $rc -eq 124 ] || [ $rc -eq 137 ] && echo true || echo false)}" >>"$OUTDIR/steps.jsonl"
  [ $rc -eq 0 ] || failed=1
  echo "device_check.sh: $name rc=$rc ($secs s)" >&2
}

# The extension is built for one Python; another Python gets it rebuilt here
# from the tree's sources against the kit's libraries and PyTorch's pybind11.
# ACCEL_CHECK_REBUILD=1 rebuilds it even where the prebuilt one imports.
python_module() {
  [ "${ACCEL_CHECK_REBUILD:-0}" = 1 ] || ! "$PY" -c "import accel._accel" 2>/dev/null || { echo "prebuilt"; return 0; }
  local inc pb="" suffix d
  inc=$("$PY" -c "import sysconfig; print(sysconfig.get_paths()['include'])")
  suffix=$("$PY" -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
  [ -f "$inc/Python.h" ] || { echo "no Python.h for $($PY --version 2>&1) at $inc"; return 1; }
  for d in "$("$PY" -c "import torch, os; print(os.path.join(os.path.dirname(torch.__file__), 'include'))" 2>/dev/null)" \
           "$("$PY" -c "import pybind11; print(pybind11.get_include())" 2>/dev/null)" /usr/include; do
    [ -n "$d" ] && [ -f "$d/pybind11/pybind11.h" ] && { pb=$d; break; }
  done
  [ -n "$pb" ] || { echo "no pybind11 headers (PyTorch's include/, the pybind11 module, /usr/include)"; return 1; }
  rm -f "$KIT"/python/accel/_accel*.so
  timeout 240 g++ -O2 -std=c++20 -shared -fPIC -fvisibility=hidden -w -I"$inc" -I"$pb" -I"$ROOT/host/include" -I"$KIT/include" \
    -I"$ROOT/transport/include" "$ROOT/python/src/module.cpp" "$ROOT/python/src/estimators.cpp" \
    -o "$KIT/python/accel/_accel$suffix" -L"$KIT/lib" "$KIT/link/libaccel_workloads.a" "$KIT/link/libaccel_cluster.a" \
    -l:libaccel_transport.so.0 -l:libaccel.so.0 -l:libaccel_core.so.0 -lpthread >"$OUTDIR/logs/python_rebuild.log" 2>&1 ||
    { echo "rebuild failed (logs/python_rebuild.log)"; return 1; }
  "$PY" -c "import accel._accel" 2>>"$OUTDIR/logs/python_rebuild.log" && { echo "rebuilt for $($PY --version)"; return 0; }
  echo "rebuilt, but it does not import (logs/python_rebuild.log)"
  return 1
}

A="$KIT/bin/accel"
# The Python module first: the peers time accel.topk on PyTorch's tensors.
pystatus=$(python_module)
pyrc=$?
[ $pyrc = 0 ] || failed=1
echo "{\"step\": \"python_module\", \"rc\": $pyrc, \"seconds\": 0, \"how\": \"$pystatus\"}" >>"$OUTDIR/steps.jsonl"
CONF=(conformance_kmeans_assign conformance_topk_histogram conformance_csr_kernel_rows conformance_async_copy)
# A top-k of R that stays on the device, against the host path, per device.
RESIDENT=(unit_topk --gtest_filter='TopKDeviceResident*')
if [ $CPU_ONLY = 0 ]; then
  DEV=cuda
  step devices 30 "$A" devices --json
  for t in "${CONF[@]}"; do
    step "$t" 90 env ACCEL_CONFORMANCE_REQUIRE=cuda "$KIT/bin/$t" --gtest_output="json:$OUTDIR/$t.json"
  done
  step conformance_topk_resident 90 env ACCEL_CONFORMANCE_REQUIRE=cuda "$KIT/bin/${RESIDENT[0]}" "${RESIDENT[@]:1}" \
    --gtest_output="json:$OUTDIR/conformance_topk_resident.json"
  step bench_fmnist 90 "$A" bench-kernels --device cuda --fashion-mnist "$FMNIST" --json
  step bench_kmeans_1m 90 "$A" bench-kernels --device cuda --kernels kmeans_assign --kmeans-shape 1000000x128x1024 --json
  step bench_topk_256m 60 "$A" bench-kernels --device cuda --kernels topk_histogram --topk-floats 268435456 --json
  step topk_cli_16m 40 "$A" topk --synthetic laplace --n 16777216 --ratio 0.001 --method exact --device cuda --json
  step topk_cli_256m 60 "$A" topk --synthetic laplace --n 268435456 --ratio 0.001 --method exact --device cuda --json
  step peers 120 "$PY" "$ROOT/scripts/device_check/torch_peers.py" --device cuda --fashion-mnist "$FMNIST" \
    --out "$OUTDIR/peers.json"
else
  DEV=cpu
  step devices 30 "$A" devices --json
  for t in "${CONF[@]}"; do
    step "$t" 300 "$KIT/bin/$t" --gtest_output="json:$OUTDIR/$t.json" --gtest_filter='*EveryDevice*:*AsyncCopies*'
  done
  step conformance_topk_resident 120 "$KIT/bin/${RESIDENT[0]}" "${RESIDENT[@]:1}" \
    --gtest_output="json:$OUTDIR/conformance_topk_resident.json"
  step bench_fmnist 120 "$A" bench-kernels --device cpu --fashion-mnist "$FMNIST" --quick --json
  step bench_kmeans_1m 60 "$A" bench-kernels --device cpu --kernels kmeans_assign --kmeans-shape 20000x128x64 --json
  step bench_topk_256m 60 "$A" bench-kernels --device cpu --kernels topk_histogram --topk-floats 4194304 --json
  step topk_cli_16m 40 "$A" topk --synthetic laplace --n 1048576 --ratio 0.001 --method exact --device cpu --json
  step peers 120 "$PY" "$ROOT/scripts/device_check/torch_peers.py" --device cpu --quick --fashion-mnist "$FMNIST" \
    --out "$OUTDIR/peers.json"
fi
step ddp 120 "$PY" "$ROOT/scripts/device_check/ddp_hook.py" --device "$DEV" --out "$OUTDIR/ddp.json"
# Last: the slowest step, and the others' numbers matter more if time runs out.
if [ $CPU_ONLY = 0 ] && [ -n "$SANITIZER" ]; then
  # The cases that launch on devices; the cpu loops' own tests add nothing here.
  for t in "${CONF[@]}"; do
    step "memcheck_$t" 120 env ACCEL_CONFORMANCE_REQUIRE=cuda "$SANITIZER" --tool memcheck --error-exitcode 99 \
      --print-limit 20 "$KIT/bin/$t" --gtest_filter='*EveryDevice*:*AsyncCopies*:*Candidates*'
  done
  step memcheck_topk_resident 120 env ACCEL_CONFORMANCE_REQUIRE=cuda "$SANITIZER" --tool memcheck --error-exitcode 99 \
    --print-limit 20 "$KIT/bin/${RESIDENT[0]}" "${RESIDENT[@]:1}"
elif [ $CPU_ONLY = 0 ]; then
  echo '{"step": "memcheck", "rc": null, "seconds": 0, "skipped": "no compute-sanitizer on this machine"}' >>"$OUTDIR/steps.jsonl"
  failed=1
fi

"$PY" "$ROOT/scripts/device_check/summarize.py" --dir "$OUTDIR" --seconds $(( $(date +%s) - START )) || failed=1
if [ $PACK = 1 ]; then
  packed="$(mktemp /tmp/accel-check-logs.XXXXXX)"
  (cd "$OUTDIR" && tar -czf "$packed" --exclude=results.json --exclude=results.md . &&
     find . -mindepth 1 -maxdepth 1 ! -name results.json ! -name results.md -exec rm -rf {} + &&
     mv "$packed" logs.tar.gz)
fi
echo "device_check.sh: results in $OUTDIR/results.md ($(( $(date +%s) - START )) s)" >&2
exit $failed
