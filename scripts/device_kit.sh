#!/usr/bin/env bash
# Builds accel with CUDA here and packs what scripts/device_check.sh needs on
# a bare GPU machine (nvcc, CMake and PyTorch, but none of Debian's -dev
# libraries) into one git-ignored folder, device-kit/:
#   kit.tar.xz      bin/ (accel, the conformance suites, unit_topk), lib/ (libaccel,
#                   libaccel_transport and their ldd closure, minus glibc and
#                   the CUDA driver), python/accel (the package and its
#                   extension), include/ + link/ (to rebuild the extension
#                   there for another Python)
#   fashion-mnist/  the training images bench-kernels and the peers read
#   manifest.json   what was packed: commit, sizes, the glibc and Python it needs
# device_check.sh unpacks it and runs with LD_LIBRARY_PATH on lib/.
#
#   scripts/device_kit.sh                 build build-kit/ (portable: x86-64-v3, sm_90) and pack
#   scripts/device_kit.sh --from BUILD    pack an existing build (CI's CPU half of the check)
#   scripts/device_kit.sh --out DIR       pack into DIR instead of device-kit/
# ACCEL_KIT_LIMIT_MIB (60) and ACCEL_KIT_XZ_LEVEL (6): the size the kit must
# stay under and xz's level (CI packs its own build, larger, at level 1).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUTDIR="$ROOT/device-kit"
FROM=""
LIMIT_MIB=${ACCEL_KIT_LIMIT_MIB:-60}
while [ $# -gt 0 ]; do
  case "$1" in
    --from) FROM="$2"; shift 2 ;;
    --out) OUTDIR="$2"; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "device_kit.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

TESTS=(conformance_kmeans_assign conformance_topk_histogram conformance_csr_kernel_rows conformance_async_copy unit_topk)
TARGETS=(accel "${TESTS[@]}" _accel)
if [ -z "$FROM" ]; then
  "$ROOT/scripts/setup.sh"
  FROM="$ROOT/build-kit"
  mkdir -p "$FROM"
  # The GPU machine's CPU is unknown: x86-64-v3 (AVX2, FMA) runs on every
  # H100/H200 host; -march=native here (AVX-512) might not. sm_90 only: the
  # kit's fatbin is for the H100/H200 the device tool lends.
  if ! { cmake -S "$ROOT" -B "$FROM" -G Ninja -DCMAKE_BUILD_TYPE=Release \
           -DPython_EXECUTABLE=/usr/bin/python3 -DPython3_EXECUTABLE=/usr/bin/python3 \
           -DACCEL_NATIVE=OFF -DCMAKE_CXX_FLAGS=-march=x86-64-v3 -DCMAKE_CUDA_ARCHITECTURES=90 \
           -DACCEL_WITH_CUDA=ON -DACCEL_WITH_XRT=OFF -DACCEL_WITH_OPENCL=ON -DACCEL_WITH_UCX=ON \
           -DACCEL_WITH_PYTHON=ON &&
         cmake --build "$FROM" -j"$(nproc)" --target "${TARGETS[@]}"; } >"$FROM/kit-build.log" 2>&1; then
    grep -E "error|Error" "$FROM/kit-build.log" | head -20 >&2 || true
    echo "device_kit.sh: build failed (log: $FROM/kit-build.log)" >&2
    exit 1
  fi
fi
FROM="$(cd "$FROM" && pwd)"
for t in accel "${TESTS[@]}"; do
  [ -x "$FROM/bin/$t" ] || { echo "device_kit.sh: $FROM/bin/$t is missing (build the targets: ${TARGETS[*]})" >&2; exit 1; }
done
EXT="$(ls "$FROM"/python/accel/_accel*.so 2>/dev/null | head -1)"
[ -n "$EXT" ] || { echo "device_kit.sh: no Python extension in $FROM/python/accel" >&2; exit 1; }

STAGE="$(mktemp -d)"
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE"/{bin,lib,python/accel,include/accel,link}
for t in accel "${TESTS[@]}"; do
  cp "$FROM/bin/$t" "$STAGE/bin/"
done
cp -L "$FROM/host/libaccel.so.0" "$STAGE/lib/libaccel.so.0"
cp -L "$FROM/transport/libaccel_transport.so.0" "$STAGE/lib/libaccel_transport.so.0"
cp "$FROM"/python/accel/*.py "$EXT" "$STAGE/python/accel/"
# To rebuild the extension on the GPU machine when its Python is another
# version: the generated header and the static parts _accel links.
cp "$FROM/generated/accel/config.hpp" "$STAGE/include/accel/"
cp "$FROM/host/cluster/libaccel_cluster.a" "$STAGE/link/"
ar rcs "$STAGE/link/libaccel_workloads.a" "$FROM"/host/cluster/CMakeFiles/accel_workloads.dir/workloads/*/*.o

# The ldd closure. glibc's own libraries and the CUDA driver stay behind:
# they must match the machine's kernel and GPU driver.
skip='^(libc|libm|libmvec|libdl|librt|libpthread|libutil|libresolv|ld-linux-x86-64|linux-vdso|libcuda|libnvidia-.*)\.so'
declare -A seen=()
queue=("$STAGE"/bin/* "$STAGE"/lib/* "$STAGE"/python/accel/*.so)
while [ ${#queue[@]} -gt 0 ]; do
  f="${queue[0]}"
  queue=("${queue[@]:1}")
  while read -r name path; do
    [[ "$name" =~ $skip ]] && continue
    [ -n "${seen[$name]:-}" ] && continue
    seen[$name]=1
    [ -e "$STAGE/lib/$name" ] && continue
    [ -f "$path" ] || { echo "device_kit.sh: $f needs $name, which ldd did not find" >&2; exit 1; }
    cp -L "$path" "$STAGE/lib/$name"
    queue+=("$STAGE/lib/$name")
  done < <(LD_LIBRARY_PATH="$STAGE/lib" ldd "$f" 2>/dev/null | awk '/=>/ {print $1, $3}')
done
find "$STAGE" -type f \( -name '*.so*' -o -perm -u+x \) ! -name '*.py' -exec strip --strip-unneeded {} + 2>/dev/null || true
# GCC's runtime goes to lib/gcc: Debian's libstdc++ asks for glibc 2.36, and
# a machine with an older glibc (Ubuntu 22.04: 2.35) has a libstdc++ of its
# own that is new enough (GLIBCXX_3.4.30, GCC 12); device_check.sh puts
# lib/gcc on the path only where the machine's glibc takes it. A Python that
# loaded the machine's libstdc++ (PyTorch) keeps it either way.
mkdir -p "$STAGE/lib/gcc"
for g in libstdc++.so.6 libgcc_s.so.1; do
  [ -f "$STAGE/lib/$g" ] && mv "$STAGE/lib/$g" "$STAGE/lib/gcc/"
done

# The newest glibc symbol version the kit asks for, without and with lib/gcc.
newest_glibc() {
  objdump -T "$@" 2>/dev/null | grep -o 'GLIBC_[0-9.]*[0-9]' | sed 's/GLIBC_//' | sort -uV | tail -1
}
glibc="$(newest_glibc "$STAGE"/bin/* "$STAGE"/lib/*.so* "$STAGE"/python/accel/*.so)"
glibc_gcc="$(newest_glibc "$STAGE"/lib/gcc/*)"
glibcxx="$(objdump -T "$STAGE"/bin/* "$STAGE"/lib/*.so* "$STAGE"/python/accel/*.so 2>/dev/null |
           grep -o 'GLIBCXX_[0-9.]*[0-9]' | sed 's/GLIBCXX_//' | sort -uV | tail -1)"
pytag="$(basename "$EXT" | sed -E 's/^_accel\.(cpython-[0-9]+)[^.]*\.so$/\1/')"
unpacked=$(du -sb "$STAGE" | cut -f1)

rm -rf "$OUTDIR"
mkdir -p "$OUTDIR/fashion-mnist"
tar -C "$STAGE" -cf - . | xz -T0 -"${ACCEL_KIT_XZ_LEVEL:-6}" >"$OUTDIR/kit.tar.xz"
FMNIST=/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz
[ -f "$FMNIST" ] && cp "$FMNIST" "$OUTDIR/fashion-mnist/"
commit="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
dirty="$(git -C "$ROOT" status --porcelain 2>/dev/null | grep -qv '^??' && echo true || echo false)"
total=$(du -sb "$OUTDIR" | cut -f1)
cat >"$OUTDIR/manifest.json" <<EOF
{"commit": "$commit", "uncommitted_changes": $dirty, "built": "$(date -u +%FT%TZ)",
 "from": "$FROM", "glibc_needed": "$glibc", "glibc_needed_by_lib_gcc": "$glibc_gcc",
 "glibcxx_needed": "$glibcxx", "python_extension": "$pytag",
 "unpacked_bytes": $unpacked, "kit_bytes": $total,
 "files": $(cd "$STAGE" && find . -type f | sort | python3 -c 'import json,sys; print(json.dumps([l.strip() for l in sys.stdin]))')}
EOF
mib=$(( (total + 1048575) / 1048576 ))
if [ "$mib" -gt "$LIMIT_MIB" ]; then
  echo "device_kit.sh: the kit is $mib MiB, over its $LIMIT_MIB MiB limit" >&2
  exit 1
fi
echo "device_kit.sh: $OUTDIR: $mib MiB ($((unpacked / 1048576)) MiB unpacked), glibc >= $glibc, Python extension $pytag"
