#!/usr/bin/env python3
"""Round time against the member count, with real processes on loopback
(the simulator issue's scale report, its real-process half): distributed
k-means with K = 256, d = 64 (the issue's shape) and few rows per member,
so that the exchange, not the compute, is what a round costs. For each P in
--members: a coordinator and P workers, --iters rounds; then, with --kill,
the same job with 10% of the workers (at least one) killed -9 together at
round 10, and how long until a round counted again.

Each P runs with each exchange of --exchanges: the all-to-all (every
member sends its partial sums to every other) and the gathered one (the
coordinator's --gather-from 2: every worker sends its sums to the
coordinator alone, which sends back the new centroids), so that the
--gather-from default is chosen by measurement; and the tree (--tree-from
2: the sums go up a binary tree of workers, the centroids down it).

Printed per P and exchange: the median round (compute + synchronization)
and synchronization alone, over the coordinator's rounds after the first,
and the bytes each worker receives per round, computed from the message
sizes since the transport counts messages, not bytes: in the all-to-all
every member gets every other member's K x d sums and K counts as doubles,
P x (8 K d + 8 K + 8) bytes of payload; gathered, a worker gets the
centroids as floats, 4 K d bytes and a few more; up the tree, an interior
worker gets two children's sums as well (the most a worker receives). With --kill: the rounds
the loss took, the longest of them, and the centroids against the
failure-free run.

All P + 1 processes share this machine's cores (one OpenMP thread each):
above the core count a round also measures the scheduler. Say so when
quoting it.

    python3 scripts/bench_members.py                     # P = 2 4 8 16, both exchanges
    python3 scripts/bench_members.py --members 4 16 --kill --exchanges gathered
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import jsonl, kill_left, wait_job  # noqa: E402
from bench_svm_cluster import free_port  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def make_data(path, rows, cols, seed=7):
    import numpy as np
    rng = np.random.default_rng(seed)
    centers = rng.normal(0, 6, (64, cols)).astype(np.float32)
    x = centers[rng.integers(0, 64, rows)] + rng.normal(0, 1, (rows, cols)).astype(np.float32)
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, cols)
    header += " " * (64 - (10 + len(header) + 1) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(x.astype(np.float32).tobytes())


def run(args, data, members, out_dir, exchange, kill=0):
    run_dir = out_dir / (f"p{members}-{exchange}" + ("-kill" if kill else ""))
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    port = free_port()
    log = run_dir / "coordinator.jsonl"
    timeout_ms = str(args.timeout_ms)
    coord = subprocess.Popen(
        [args.accel, "coordinator", "--input", str(data), "--k", str(args.k), "--max-iter", str(args.iters), "--init",
         "random", "--tol", "0", "--workers", str(members), "--listen", f"127.0.0.1:{port}", "--device", "cpu",
         "--log-json", str(log), "--json", "--output-centroids", str(run_dir / "centroids.npy"), "--timeout-ms",
         timeout_ms, "--join-timeout-ms", str(120000), "--gather-from", "0" if exchange == "all-to-all" else "2",
         "--tree-from", "2" if exchange == "tree" else "0"],
        stdout=open(run_dir / "coordinator.out", "w"), stderr=open(run_dir / "coordinator.err", "w"), env=env)
    procs = {}
    try:
        for w in range(1, members + 1):
            procs[w] = subprocess.Popen(
                [args.accel, "worker", "--coordinator", f"127.0.0.1:{port}", "--id", str(w), "--device", "cpu",
                 "--timeout-ms", timeout_ms, "--log-json", str(run_dir / f"worker-{w}.jsonl")],
                stdout=open(run_dir / f"worker-{w}.out", "w"), stderr=open(run_dir / f"worker-{w}.err", "w"), env=env)
        if kill:
            end = time.time() + 600
            while time.time() < end and coord.poll() is None:
                if sum(1 for j in jsonl(log) if j.get("participant") == 0) >= 10:
                    for w in range(members - kill + 1, members + 1):
                        procs[w].send_signal(signal.SIGKILL)
                    break
                time.sleep(0.02)
        wait_job(coord, list(procs.values()))
    finally:
        kill_left([coord, *procs.values()])
    if coord.returncode != 0:
        raise SystemExit(f"P = {members} failed: " + (run_dir / "coordinator.err").read_text()[-800:])
    rounds = [j for j in jsonl(log) if j.get("participant") == 0]
    return rounds, run_dir / "centroids.npy"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--accel", default=str(REPO / "build" / "bin" / "accel"))
    ap.add_argument("--dir", default="/tmp/accel-members")
    ap.add_argument("--members", type=int, nargs="+", default=[2, 4, 8, 16])
    ap.add_argument("--rows-per-member", type=int, default=2000)
    ap.add_argument("--k", type=int, default=256)
    ap.add_argument("--cols", type=int, default=64)
    ap.add_argument("--iters", type=int, default=40)
    ap.add_argument("--timeout-ms", type=int, default=3000)
    ap.add_argument("--exchanges", default="all-to-all,gathered",
                    help="comma-separated: all-to-all, gathered (the coordinator's --gather-from 2), tree "
                         "(--gather-from 2 --tree-from 2)")
    ap.add_argument("--kill", action="store_true", help="also a run with 10%% of the workers killed at round 10")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    for name, v in (("--rows-per-member", args.rows_per_member), ("--k", args.k), ("--cols", args.cols),
                    ("--iters", args.iters), ("--timeout-ms", args.timeout_ms), *(("--members", p) for p in args.members)):
        if v < 1:
            ap.error(f"{name} {v}: must be at least 1")
    exchanges = args.exchanges.split(",")
    for e in exchanges:
        if e not in ("all-to-all", "gathered", "tree"):
            ap.error(f"--exchanges {e}: all-to-all, gathered or tree")
    if args.iters < 12 and args.kill:
        ap.error("--kill needs --iters of at least 12 (the kill is at round 10)")
    import numpy as np
    out_dir = Path(args.dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    results = []
    print(f"k-means K={args.k} d={args.cols}, {args.rows_per_member} rows per member, {args.iters} rounds, "
          f"{os.cpu_count()} cores; round and synchronization: medians over the coordinator's rounds after the first")
    print(f"{'P':>4}{'exchange':>12}{'round ms':>10}{'sync ms':>9}{'recv KB/worker/round':>22}  lost 10%")
    for p, exchange in ((p, e) for p in args.members for e in exchanges):
        data = out_dir / f"x-{p}.npy"
        if not data.exists():
            make_data(data, args.rows_per_member * (p + 1), args.cols)
        rounds, cen = run(args, data, p, out_dir, exchange)
        times = [(j["computing_s"] + j["synchronizing_s"]) * 1e3 for j in rounds[1:]]
        sync = [j["synchronizing_s"] * 1e3 for j in rounds[1:]]
        recv = (p * (8 * args.k * args.cols + 8 * args.k + 8) if exchange == "all-to-all"
                else 4 * args.k * args.cols + (2 * (8 * args.k * args.cols + 8 * args.k + 8) if exchange == "tree" else 0))
        r = {"members": p, "exchange": exchange, "round_ms": statistics.median(times), "sync_ms": statistics.median(sync),
             "recv_bytes_per_member_round": recv}
        said = "-"
        if args.kill:
            lost = max(1, p // 10)
            kr, kcen = run(args, data, p, out_dir, exchange, kill=lost)
            short = [j for j in kr if j["evicted"] or len(j["members"]["active"]) < p + 1]
            first = next((j for j in kr if j["evicted"]), None)
            # Rounds from the first that evicted to the first that counted
            # without waiting for the lost ones (no eviction, fewer active).
            after = [j for j in kr if first and j["iteration"] > first["iteration"] and not j["evicted"]]
            took = ((after[0]["t_s"] - first["t_s"]) if after and first else None)
            diff = float(np.max(np.abs(np.load(kcen) - np.load(cen)) / np.maximum(np.abs(np.load(cen)), 1e-6)))
            r.update({"killed": lost, "evicted_rounds": [j["iteration"] for j in kr if j["evicted"]],
                      "recovery_s": took, "rounds_short": len(short), "centroid_rel_diff": diff})
            said = (f"{lost} killed: evicted in rounds {r['evicted_rounds']}, counting again "
                    f"{'?' if took is None else f'{took:.2f} s'} later (timeout {args.timeout_ms / 1e3:.1f} s); "
                    f"centroids within {diff:.1e} of the failure-free run")
        results.append(r)
        print(f"{p:>4}{exchange:>12}{r['round_ms']:>10.2f}{r['sync_ms']:>9.2f}{recv / 1024:>22.0f}  {said}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
