#!/usr/bin/env python3
"""How the cluster job's memory and time grow with its members (the
scale-out issue's benchmark): distributed k-means on one local float32 .npy
(default 6M x 64, 1.54 GB), a coordinator and K workers on loopback for K in
--workers, each process under its own memory cap (a cgroup v1 memory limit,
--cap-fraction of the data set's bytes; run as root) and /usr/bin/time.

Printed per run and process: the rows it owns at the end, its peak RSS
against the bound 1.1 x those rows' bytes + 150 MB, and the cgroup's peak
(page cache included). Per run: loading (the coordinator's read, checks and
seeding, and the workers' count of a text input they split) + sharing
(until every member holds its rows), the median round,
and the centroids against a single-node `accel kmeans` with the same seed
(max relative difference; the target is 1e-6). --kill adds a run with the
last worker killed -9 at round 3 and not restarted. A cgroup v1 limit
charges a page of the file to whoever read it first: --drop-caches empties
the page cache before each run, so that each process's reads count in its
own cap (and the runs read from disk, not memory).

    python3 scripts/bench_scale.py                       # 6M x 64, K = 1 2 3
    python3 scripts/bench_scale.py --rows 1000000 --workers 3 --kill
    python3 scripts/bench_scale.py --rows 1000000 --workers 3 --text csv --init kmeans-parallel
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
from bench_svm_cluster import free_port  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
CGROUP = Path("/sys/fs/cgroup/memory")


def make_data(path, rows, cols, seed=5):
    """Gaussian blobs around 32 centers, written a block at a time."""
    import numpy as np
    rng = np.random.default_rng(seed)
    centers = rng.normal(0, 4, (32, cols)).astype(np.float32)
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, cols)
    header += " " * (64 - (10 + len(header) + 1) % 64) + "\n"
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        for at in range(0, rows, 500000):
            n = min(500000, rows - at)
            x = centers[rng.integers(0, 32, n)] + rng.normal(0, 1, (n, cols)).astype(np.float32)
            f.write(x.astype(np.float32).tobytes())
    tmp.rename(path)


def make_text(npy, path, fmt):
    """The .npy's rows as CSV or LIBSVM text (5 significant digits), a
    block at a time."""
    import numpy as np
    x = np.load(npy, mmap_mode="r")
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as f:
        for at in range(0, x.shape[0], 100000):
            block = np.asarray(x[at:at + 100000])
            if fmt == "csv":
                np.savetxt(f, block, fmt="%.5g", delimiter=",")
            else:
                cols = " ".join(f"{j + 1}:%.5g" for j in range(block.shape[1]))
                np.savetxt(f, block, fmt="0 " + cols)
    tmp.rename(path)


def read_npy(path):
    import numpy as np
    return np.load(path)


class Cap:
    """A cgroup v1 memory limit for one process (and what it starts)."""

    def __init__(self, name, limit):
        self.dir = None
        if limit <= 0 or not CGROUP.is_dir() or os.geteuid() != 0:
            return
        self.dir = CGROUP / f"accel-bench-{os.getpid()}-{name}"
        self.dir.mkdir(exist_ok=True)
        (self.dir / "memory.limit_in_bytes").write_text(str(int(limit)))

    def enter(self):  # in the child, before exec
        if self.dir is not None:
            (self.dir / "cgroup.procs").write_text(str(os.getpid()))

    def peak(self):
        return int((self.dir / "memory.max_usage_in_bytes").read_text()) if self.dir else None

    def oom_kills(self):
        """How often the kernel's OOM killer struck in this cgroup."""
        if not self.dir:
            return None
        for line in (self.dir / "memory.oom_control").read_text().splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
        return None

    def close(self):
        if self.dir is not None:
            for _ in range(50):
                try:
                    self.dir.rmdir()
                    return
                except OSError:
                    time.sleep(0.1)


def timed(cmd, cap, out, err, env):
    return subprocess.Popen(["/usr/bin/time", "-f", "maxrss_kb %M", *cmd], stdout=out, stderr=err, env=env,
                            preexec_fn=cap.enter)


def ended(err_path):
    """How /usr/bin/time saw the process end: None for exit 0, else the
    line it wrote ("Command terminated by signal 9": the OOM killer under a
    cap, or the benchmark's own kill)."""
    said = [l for l in Path(err_path).read_text().splitlines() if l.startswith("Command ")]
    return said[-1] if said else None


def max_rss(err_path):
    said = [l for l in Path(err_path).read_text().splitlines() if l.startswith("maxrss_kb")]
    return int(said[-1].split()[1]) * 1024 if said else None


def jsonl(path):
    return [json.loads(l) for l in Path(path).read_text().splitlines() if l.strip()] if Path(path).exists() else []


def kill_left(procs):
    """Whatever of a run is still going (a failed wait), killed and reaped."""
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def wait_job(coord, procs):
    """The coordinator's end, then its workers' (a stuck worker killed)."""
    coord.wait(timeout=1800)
    for p in procs:
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()


def single(args, data, out_dir):
    cen = out_dir / "single.npy"
    t0 = time.time()
    r = subprocess.run([args.accel, "kmeans", "--input", str(data), "--k", str(args.k), "--max-iter", str(args.iters),
                        "--init", args.init, "--tol", "0", "--device", "cpu", "--output-centroids", str(cen), "--json"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("single-node k-means failed: " + r.stderr[-800:])
    return cen, time.time() - t0


def distributed(args, data, workers, out_dir, cap_bytes, kill=False):
    run = out_dir / (f"k{workers}" + ("-kill" if kill else ""))
    shutil.rmtree(run, ignore_errors=True)
    run.mkdir(parents=True)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    port = free_port()
    caps = [Cap(f"{workers}-{i}", cap_bytes) for i in range(workers + 1)]
    log = run / "coordinator.jsonl"
    coord = timed([args.accel, "coordinator", "--input", str(data), "--k", str(args.k), "--max-iter", str(args.iters),
                   "--init", args.init, "--tol", "0", "--workers", str(workers), "--listen", f"127.0.0.1:{port}", "--device", "cpu",
                   "--log-json", str(log), "--json", "--output-centroids", str(run / "centroids.npy"),
                   "--timeout-ms", "3000", *(["--pull"] if args.mode == "pull" else [])],
                  caps[0], open(run / "coordinator.out", "w"), open(run / "coordinator.err", "w"), env)
    procs = {}
    try:
        for w in range(1, workers + 1):
            procs[w] = timed([args.accel, "worker", "--coordinator", f"127.0.0.1:{port}", "--id", str(w), "--device",
                              "cpu", "--timeout-ms", "3000", "--log-json", str(run / f"worker-{w}.jsonl")],
                             caps[w], open(run / f"worker-{w}.out", "w"), open(run / f"worker-{w}.err", "w"), env)
        if kill:
            end = time.time() + 600
            while time.time() < end and coord.poll() is None:
                if sum(1 for j in jsonl(log) if j.get("participant") == 0) >= 3:
                    # The accel process under /usr/bin/time: time's child.
                    child = subprocess.run(["pgrep", "-P", str(procs[workers].pid)], capture_output=True,
                                           text=True).stdout.split()
                    for pid in child:
                        os.kill(int(pid), signal.SIGKILL)
                    break
                time.sleep(0.05)
        wait_job(coord, list(procs.values()))
    finally:
        kill_left([coord, *procs.values()])
    if coord.returncode != 0:
        raise SystemExit(f"distributed run ({workers} workers) failed: "
                         + (run / "coordinator.err").read_text()[-800:])
    summary = json.loads((run / "coordinator.out").read_text().splitlines()[0])
    lines = jsonl(log)
    rows = list(summary["rows"])
    # Rows each process computes at the end: the re-split's tails and a lost
    # member's rows move to the coordinator (the most it held at once).
    held = [sum(l - k for l, k in zip(rows[1:], e["kept"][1:])) for e in lines if e.get("event") == "resplit"]
    taken = sum(e["rows"] for e in lines if e.get("event") == "rows_taken_over")
    moved = [e["moves"] for e in lines if e.get("event") == "rows_moved"]
    owned = [rows[0] + max(held, default=0), *rows[1:]]
    if moved:  # --pull: the survivors compute a lost member's rows
        for m in moved[-1]:
            owned[m["by"]] += m["rows"]
    else:  # the coordinator stands in
        owned[0] += taken
    if kill:
        owned[workers] = 0
    rounds = [j["computing_s"] + j["synchronizing_s"] for j in lines if j.get("participant") == 0]
    procs_out = []
    for i in range(workers + 1):
        err = run / ("coordinator.err" if i == 0 else f"worker-{i}.err")
        procs_out.append({"rows": owned[i], "rss": max_rss(err), "cgroup_peak": caps[i].peak(), "ended": ended(err),
                          "oom_kills": caps[i].oom_kills()})
        caps[i].close()
    return {"workers": workers, "kill": kill, "summary": summary, "procs": procs_out,
            "loading": summary["seconds"]["loading"] + summary["seconds"].get("counting", 0),
            "counting": summary["seconds"].get("counting", 0), "sharing": summary["seconds"]["sharing"],
            "round": statistics.median(rounds[1:] or rounds), "centroids": run / "centroids.npy"}


def rounds_of(log):
    return [j for j in jsonl(log) if j.get("participant") == 0]


def elastic(args, data, out_dir):
    """--workers 2 --max-workers 4 --pull; two workers without ids start at
    round 3; once both count and 10 more rounds ran, worker 1 gets SIGTERM."""
    run = out_dir / "elastic"
    shutil.rmtree(run, ignore_errors=True)
    run.mkdir(parents=True)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    port = free_port()
    log = run / "coordinator.jsonl"
    out = lambda name: open(run / name, "w")  # noqa: E731
    coord = subprocess.Popen([args.accel, "coordinator", "--input", str(data), "--k", str(args.k), "--max-iter",
                              str(args.elastic_iters), "--init", args.init, "--tol", "0", "--workers", "2",
                              "--max-workers", "4", "--pull", "--listen", f"127.0.0.1:{port}", "--device", "cpu",
                              "--log-json", str(log), "--json", "--output-centroids", str(run / "centroids.npy"),
                              "--timeout-ms", "3000"], stdout=out("coordinator.out"), stderr=out("coordinator.err"),
                             env=env)
    worker = lambda name, *extra: subprocess.Popen(  # noqa: E731
        [args.accel, "worker", "--coordinator", f"127.0.0.1:{port}", *extra, "--device", "cpu", "--timeout-ms", "3000",
         "--log-json", str(run / f"{name}.jsonl")], stdout=out(f"{name}.out"), stderr=out(f"{name}.err"), env=env)
    procs = {"worker-1": worker("worker-1", "--id", "1"), "worker-2": worker("worker-2", "--id", "2")}

    def wait(pred, what, seconds=600):
        end = time.time() + seconds
        while time.time() < end and coord.poll() is None:
            if pred():
                return
            time.sleep(0.05)
        raise SystemExit(f"elastic run: no {what}")

    try:
        wait(lambda: len(rounds_of(log)) >= 3, "round 3")
        procs["joiner-a"] = worker("joiner-a")
        procs["joiner-b"] = worker("joiner-b")
        counting = lambda: [j for j in rounds_of(log) if {3, 4} <= set(j["members"]["active"])]  # noqa: E731
        wait(lambda: counting(), "round with both joiners")
        both = counting()[0]["iteration"]
        wait(lambda: len(rounds_of(log)) >= both + 10, "10 rounds after the join")
        procs["worker-1"].send_signal(signal.SIGTERM)
        coord.wait(timeout=1800)
        for p in procs.values():
            p.wait(timeout=60)
    finally:
        kill_left([coord, *procs.values()])
    if coord.returncode != 0:
        raise SystemExit("elastic run failed: " + (run / "coordinator.err").read_text()[-800:])
    rounds = rounds_of(log)
    counted = {w: next(j["iteration"] for j in rounds if w in j["members"]["active"]) for w in (3, 4)}
    holds = {}
    for name in ("joiner-a", "joiner-b"):
        lines = jsonl(run / f"{name}.jsonl")
        me = next(j["participant"] for j in lines if "participant" in j)
        holds[me] = next((j["iteration"] for j in lines if "moved_in" in j), None)  # the round they are in effect
    left = next(j for j in jsonl(log) if j.get("event") == "left")
    times = [j["computing_s"] + j["synchronizing_s"] for j in rounds]
    median = statistics.median(times)
    after = next(t for j, t in zip(rounds, times) if j["iteration"] == left["iteration"])
    return {"counted": counted, "holds_rows": holds, "left": left["iteration"], "round_after_leave": after,
            "median_round": median, "evicted": [j["iteration"] for j in rounds if j["evicted"]],
            "codes": {n: p.returncode for n, p in procs.items()}, "centroids": run / "centroids.npy"}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--accel", default=str(REPO / "build" / "bin" / "accel"))
    ap.add_argument("--dir", default=os.environ.get("ACCEL_SCALE_DIR", "/tmp/accel-scale"))
    ap.add_argument("--rows", type=int, default=6000000)
    ap.add_argument("--cols", type=int, default=64)
    ap.add_argument("--k", type=int, default=16)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--init", default="kmeans++", help="kmeans++ | random | kmeans-parallel (every run alike)")
    ap.add_argument("--workers", type=int, nargs="*", default=[1, 2, 3], help="worker counts to run (none: only --elastic)")
    ap.add_argument("--mode", choices=["pull", "push"], default="pull")
    ap.add_argument("--cap-fraction", type=float, default=0.4,
                    help="each process's memory cap as a fraction of the data's bytes (0: none)")
    ap.add_argument("--cap-floor-mb", type=float, default=300,
                    help="the smallest cap: a process's libraries and buffers alone take ~100 MB")
    ap.add_argument("--drop-caches", action="store_true",
                    help="empty the page cache before each run (root): each process's reads are then charged to "
                    "its own cgroup, not to whoever read the file first")
    ap.add_argument("--kill", action="store_true", help="also a run with the last worker killed -9 at round 3")
    ap.add_argument("--elastic", action="store_true",
                    help="also a run of 2 workers (--max-workers 4) that 2 more join without ids, then worker 1 leaves")
    ap.add_argument("--elastic-iters", type=int, default=60)
    ap.add_argument("--text", choices=["csv", "libsvm"], help="run on the rows written as this text instead")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    import numpy as np

    out_dir = Path(args.dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    data = out_dir / f"x-{args.rows}x{args.cols}.npy"
    if not data.exists():
        print(f"writing {data} ...", flush=True)
        make_data(data, args.rows, args.cols)
    if args.text:
        # The same rows as text: the members count it in byte splits
        # (--init kmeans-parallel) or the coordinator reads it all (else).
        text = data.with_suffix("." + ("csv" if args.text == "csv" else "svm"))
        if not text.exists():
            print(f"writing {text} ...", flush=True)
            make_text(data, text, args.text)
        data = text
    size = data.stat().st_size
    row_bytes = args.cols * 4
    cap = max(args.cap_fraction * size, args.cap_floor_mb * 1e6) if args.cap_fraction > 0 else 0
    capped = cap > 0 and CGROUP.is_dir() and os.geteuid() == 0
    print(f"{data.name}: {size / 1e9:.2f} GB; mode --{args.mode}; cap per process "
          + (f"{cap / 1e6:.0f} MB (cgroup v1)" if capped else "none" if cap == 0
             else "none (needs root and cgroup v1 memory)"), flush=True)
    ref, ref_wall = single(args, data, out_dir)
    c_ref = read_npy(ref)
    results = []
    cases = [(w, False) for w in args.workers] + ([(max(args.workers), True)] if args.kill and args.workers else [])
    for workers, kill in cases:
        if args.drop_caches:
            subprocess.run(["sync"], check=True)
            Path("/proc/sys/vm/drop_caches").write_text("1")
        # A cap below a share's rows cannot hold (1 or 2 workers of the
        # 40% cap): those runs go uncapped, and say so.
        fits = size / (workers + 1) * 1.1 + 150e6 <= cap
        r = distributed(args, data, workers, out_dir, cap if capped and fits else 0, kill)
        r["capped"] = bool(capped and fits)
        c = read_npy(r["centroids"])
        r["centroid_rel_diff"] = float(np.max(np.abs(c - c_ref) / np.maximum(np.abs(c_ref), 1e-6)))
        results.append(r)
        print(f"\n{workers} workers{' (last one killed -9 at round 3)' if kill else ''}"
              f"{'' if r['capped'] else ', uncapped'}: loading "
              f"{r['loading']:.2f} s (the workers counting: {r['counting']:.2f} s) + sharing {r['sharing']:.2f} s; "
              f"median round {r['round']:.3f} s; "
              f"centroids within {r['centroid_rel_diff']:.1e} of single-node")
        print(f"  {'process':<12}{'rows':>10}{'rows MB':>9}{'peak RSS MB':>13}{'bound MB':>10}{'cgroup MB':>11}  ok")
        for i, p in enumerate(r["procs"]):
            own = p["rows"] * row_bytes
            bound = 1.1 * own + 150e6
            gone = kill and i == len(r["procs"]) - 1  # killed: its rows moved on
            # A process that did not exit 0 (the OOM killer under its cap)
            # misses, whatever its peak.
            ok = p["rss"] is not None and p["rss"] <= bound and (gone or (p["ended"] is None and not p["oom_kills"]))
            name = "coordinator" if i == 0 else f"worker {i}"
            cg = f"{p['cgroup_peak'] / 1e6:.0f}" if p["cgroup_peak"] else "-"
            print(f"  {name:<12}{p['rows']:>10}{own / 1e6:>9.0f}{(p['rss'] or 0) / 1e6:>13.0f}{bound / 1e6:>10.0f}"
                  f"{cg:>11}  {'killed' if gone else 'yes' if ok else 'MISSED'}"
                  + (f" ({p['ended']}; OOM kills {p['oom_kills']})" if p["ended"] and not gone else ""))
            p["within_bound"] = None if gone else ok
    if args.elastic:
        single_elastic = args.iters
        args.iters = args.elastic_iters
        ref_e, _ = single(args, data, out_dir)
        args.iters = single_elastic
        e = elastic(args, data, out_dir)
        c = read_npy(e["centroids"])
        c_ref_e = read_npy(ref_e)
        e["centroid_rel_diff"] = float(np.max(np.abs(c - c_ref_e) / np.maximum(np.abs(c_ref_e), 1e-6)))
        e["centroids"] = str(e["centroids"])
        print(f"\nelastic: 2 workers, 2 joined without ids and counted from rounds {e['counted']}, holding rows from "
              f"{e['holds_rows']}; worker 1 left at round {e['left']}, that round {e['round_after_leave']:.3f} s "
              f"against a median of {e['median_round']:.3f} s ({e['round_after_leave'] / e['median_round']:.2f}x); "
              f"evicted in rounds {e['evicted'] or 'none'}; exit codes {e['codes']}; centroids within "
              f"{e['centroid_rel_diff']:.1e} of single-node")
        results.append({"elastic": e})
    if args.json:
        for r in results:
            if "elastic" in r:
                continue
            r["centroids"] = str(r["centroids"])
        Path(args.json).write_text(json.dumps({"data": str(data), "bytes": size, "cap": cap if capped else None,
                                               "single_wall_s": ref_wall, "runs": results}, indent=1))


if __name__ == "__main__":
    main()
