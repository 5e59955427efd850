#!/usr/bin/env bash
# Fuzzes every reader of untrusted bytes with libFuzzer (clang, ASan+UBSan):
#   [FUZZ_JOBS=J] scripts/fuzz.sh SECONDS [TARGET...]
# Builds build-fuzz/ (ACCEL_FUZZ=ON), runs each target SECONDS on a copy of
# its checked-in corpus (tests/fuzz/corpus/TARGET), prints its executions,
# and copies any crash reproducer into that corpus (then a g++ build's
# ctest replays it: fuzz.TARGET). Exit 1 when a target crashed.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:?usage: scripts/fuzz.sh SECONDS [TARGET...]}
shift
TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=(npy csv libsvm idx svm_model snapshot checkpoint cluster_protocol svm_wire transport_control)
command -v clang++ >/dev/null || { echo "fuzz.sh: needs clang (apt-get install clang)" >&2; exit 2; }
SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fsanitize=fuzzer-no-link -g -O1"
cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DACCEL_FUZZ=ON \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS="$SAN" -DCMAKE_C_FLAGS="$SAN" \
  -DCMAKE_INTERPROCEDURAL_OPTIMIZATION=OFF -DPython_EXECUTABLE=/usr/bin/python3 >build-fuzz.log 2>&1 ||
  { tail -30 build-fuzz.log; exit 2; }
cmake --build build-fuzz -j"$(nproc)" --target "${TARGETS[@]/#/fuzz_}" >build-fuzz.log 2>&1 ||
  { tail -30 build-fuzz.log; echo "fuzz.sh: the clang build failed (build-fuzz.log)" >&2; exit 2; }
# FUZZ_JOBS targets at a time (default 1): each libFuzzer process is one
# thread, so on N cores N targets run in the time of one.
run_target() {
  local t=$1 work=build-fuzz/fuzz-work/$1 status=ok
  rm -rf "$work" && mkdir -p "$work/corpus" "$work/crashes"
  cp tests/fuzz/corpus/"$t"/* "$work/corpus/" 2>/dev/null || true
  local log=$work/log.txt
  build-fuzz/bin/fuzz_"$t" "$work/corpus" -max_total_time="$SECONDS_EACH" -rss_limit_mb=2048 -max_len=65536 \
    -artifact_prefix="$work/crashes/" -print_final_stats=1 >"$log" 2>&1 || status=CRASH
  local execs
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  printf "%-18s %s  %s executions in %s s\n" "$t" "$status" "$execs" "$SECONDS_EACH"
  for c in "$work"/crashes/*; do
    [ -e "$c" ] || continue
    cp "$c" tests/fuzz/corpus/"$t"/
    echo "  reproducer: tests/fuzz/corpus/$t/$(basename "$c")"
  done
  [ "$status" = ok ]
}
crashed=0
running=0
for t in "${TARGETS[@]}"; do
  if [ "$running" -ge "${FUZZ_JOBS:-1}" ]; then
    wait -n || crashed=1
    running=$((running - 1))
  fi
  run_target "$t" &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n || crashed=1
  running=$((running - 1))
done
exit $crashed
