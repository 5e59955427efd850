#!/usr/bin/env bash
# Runs a local distributed k-means job: a coordinator and N workers on this
# machine, and waits for it.
#   scripts/cluster.sh N [--netns] [--delay-ms D] [--rate-kbit R] [--kill-restart W] -- [coordinator options]
# --netns          each worker in its own network namespace (veth links on a
#                  bridge, UCX_TLS=tcp); needs root and iproute2
# --delay-ms D     with --netns: tc netem delay on every worker's link
# --rate-kbit R    with --netns: every worker's outgoing link limited to R
#                  kbit/s (tc tbf), a slow link whose queue delays each message;
#                  for kernels without netem
# --kill-restart W kill -9 worker W at iteration 10 (once its snapshot is on
#                  disk), restart it at iteration 20
# The N + 1 participants (the coordinator computes a partition too) share
# this machine's cores: unless OMP_NUM_THREADS is set, each gets nproc/(N+1)
# threads (at least 1) and, when there are enough cores and taskset exists,
# cores of its own. Processes that each run threads on every core contend
# for them; with more participants than cores none is pinned (a restarted
# worker pinned beside busy ones took 2 s instead of 3 ms to rejoin).
# Coordinator options (after --) must include --input and --k. Logs and
# snapshots go to $ACCEL_CLUSTER_DIR (default build/cluster). On real
# clusters run the same binaries under mpirun or srun instead: rank 0 runs
# `accel coordinator`, the others `accel worker` (rank and size come from
# the launcher's environment).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
ACCEL="${ACCEL_BIN:-$ROOT/build/bin/accel}"
DIR="${ACCEL_CLUSTER_DIR:-$ROOT/build/cluster}"
N="${1:-}"; shift || true
[[ "$N" =~ ^[1-9][0-9]*$ ]] || { echo "usage: scripts/cluster.sh N [--netns] [--delay-ms D | --rate-kbit R] [--kill-restart W] -- --input FILE --k K ..." >&2; exit 2; }
NETNS=0 DELAY=0 RATE=0 KILL=0
while [ $# -gt 0 ]; do
  case "$1" in
    --netns) NETNS=1; shift ;;
    --delay-ms) DELAY="$2"; shift 2 ;;
    --rate-kbit) RATE="$2"; shift 2 ;;
    --kill-restart) KILL="$2"; shift 2 ;;
    --) shift; break ;;
    *) break ;;
  esac
done
[ -x "$ACCEL" ] || { echo "cluster.sh: $ACCEL not built (scripts/build.sh)" >&2; exit 2; }
rm -rf "$DIR"; mkdir -p "$DIR/snapshots"
PORT=$((20000 + RANDOM % 20000))
HOST=127.0.0.1
PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do kill -9 "$p" 2>/dev/null || true; done
  if [ "$NETNS" = 1 ]; then
    # The host ends of the veth pairs go explicitly: a namespace's teardown
    # is asynchronous and its links can outlive it (a next run then failed
    # with "File exists").
    for i in $(seq 1 "$N"); do
      ip link del "accel-h$i" 2>/dev/null || true
      ip netns del "accel-w$i" 2>/dev/null || true
    done
    ip link del accel-br 2>/dev/null || true
  fi
}
trap cleanup EXIT

if [ "$NETNS" = 1 ]; then
  export UCX_TLS=tcp  # namespaces would otherwise still share memory
  HOST=10.77.0.1
  ip link add accel-br type bridge
  ip addr add 10.77.0.1/24 dev accel-br
  ip link set accel-br up
  for i in $(seq 1 "$N"); do
    ip netns add "accel-w$i"
    ip link add "accel-h$i" type veth peer name "accel-n$i"
    ip link set "accel-n$i" netns "accel-w$i"
    ip link set "accel-h$i" master accel-br up
    ip -n "accel-w$i" addr add "10.77.0.$((10 + i))/24" dev "accel-n$i"
    ip -n "accel-w$i" link set "accel-n$i" up
    ip -n "accel-w$i" link set lo up
    ip -n "accel-w$i" route add default via 10.77.0.1
    if [ "$DELAY" != 0 ]; then ip netns exec "accel-w$i" tc qdisc add dev "accel-n$i" root netem delay "${DELAY}ms"; fi
    if [ "$RATE" != 0 ]; then
      ip netns exec "accel-w$i" tc qdisc add dev "accel-n$i" root tbf rate "${RATE}kbit" burst 1600 latency 10s
    fi
  done
fi

CPUS=$(nproc)
PER=$(( CPUS / (N + 1) )); PIN=1
if [ "$PER" -lt 1 ]; then PER=1; PIN=0; fi
command -v taskset >/dev/null || PIN=0
worker() {  # worker I: runs in its namespace with --netns
  local i=$1
  local cmd=("$ACCEL" worker --coordinator "$HOST:$PORT" --id "$i" --snapshot-dir "$DIR/snapshots"
             --log-json "$DIR/worker-$i.jsonl")
  if [ -z "${OMP_NUM_THREADS:-}" ]; then
    local first=$(( i * PER % CPUS ))  # cores 0 .. PER-1 are the coordinator's
    if [ "$PIN" = 1 ]; then cmd=(taskset -c "$first-$(( first + PER - 1 ))" "${cmd[@]}"); fi
    cmd=(env OMP_NUM_THREADS="$PER" "${cmd[@]}")
  fi
  if [ "$NETNS" = 1 ]; then cmd=(ip netns exec "accel-w$i" "${cmd[@]}"); fi
  "${cmd[@]}" >>"$DIR/worker-$i.out" 2>>"$DIR/worker-$i.err" &
  echo $!
}

COORD_ENV=()
if [ -z "${OMP_NUM_THREADS:-}" ]; then
  COORD_ENV=(env OMP_NUM_THREADS="$PER")
  if [ "$PIN" = 1 ]; then COORD_ENV+=(taskset -c "0-$(( PER - 1 ))"); fi
fi
"${COORD_ENV[@]}" "$ACCEL" coordinator --workers "$N" --listen "$HOST:$PORT" --log-json "$DIR/coordinator.jsonl" "$@" \
  >"$DIR/coordinator.out" 2>"$DIR/coordinator.err" &
COORD=$!
PIDS+=("$COORD")
for _ in $(seq 1 100); do grep -q listening "$DIR/coordinator.err" 2>/dev/null && break; sleep 0.1; done
declare -A WPID
for i in $(seq 1 "$N"); do WPID[$i]=$(worker "$i"); PIDS+=("${WPID[$i]}"); done

iteration() { local c; c=$(grep -c '"participant":0' "$DIR/coordinator.jsonl" 2>/dev/null) || true; echo "${c:-0}"; }
if [ "$KILL" != 0 ]; then
  until [ "$(iteration)" -ge 10 ] || ! kill -0 "$COORD" 2>/dev/null; do sleep 0.02; done
  # ... once its snapshot is on disk (written beside the first iterations;
  # without it there is nothing to resume from). At most 30 s.
  for _ in $(seq 1 1500); do grep -q '"event":"snapshot"' "$DIR/worker-$KILL.jsonl" 2>/dev/null && break; sleep 0.02; done
  kill -9 "${WPID[$KILL]}" 2>/dev/null && echo "cluster.sh: killed worker $KILL at iteration $(iteration)"
  until [ "$(iteration)" -ge 20 ] || ! kill -0 "$COORD" 2>/dev/null; do sleep 0.02; done
  WPID[$KILL]=$(worker "$KILL"); PIDS+=("${WPID[$KILL]}")
  echo "cluster.sh: restarted worker $KILL at iteration $(iteration)"
fi
status=0
wait "$COORD" || status=$?
for i in $(seq 1 "$N"); do wait "${WPID[$i]}" 2>/dev/null || true; done
cat "$DIR/coordinator.out"
if [ "$status" != 0 ]; then echo "cluster.sh: coordinator failed ($status):" >&2; tail -5 "$DIR/coordinator.err" >&2; fi
echo "logs: $DIR" >&2
exit "$status"
