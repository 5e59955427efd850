#!/usr/bin/env python3
"""Distributed SVM training against single-node accel svm-train, side by side
in one run (issue 13's target): [Narasimhan14]'s MNIST setup on Fashion-MNIST
even/odd (bench_svm.py's fmnist-N case: RBF, C = 10, gamma = 0.02,
eps = 1e-3), trained

  - by `accel svm-train` with OMP_NUM_THREADS=2 (single node, both cores);
  - by `accel coordinator svm-train` + K `accel worker`s on loopback, for K
    in --workers. The coordinator holds no rows and computes no kernel
    values (it decides), so it runs on one thread unpinned, and the workers
    share the cores: each gets cores/K of them (at least one), pinned
    (taskset), with as many threads. On this 2-core machine K = 1 is the
    fair comparison (the worker has both cores, as single-node has); K = 2,
    3 share the cores and measure overhead, not speedup.

Printed: the fit seconds (the coordinator's summary seconds.job: measuring,
distributing, the rounds; single-node: svm-train --json seconds.total),
wall seconds, ratio to single-node, the model against single-node (dual
objective, support vectors), and peak RSS (/usr/bin/time) of single-node,
the coordinator and the largest worker, with the coordinator's bound from
issue 29: the bytes of the rows it owns (its share in the summary, as CSR:
8 bytes a non-zero and 8 a row) + the kernel cache (-m) + 150 MB. Medians of --repeat
runs.

    python3 scripts/bench_svm_cluster.py --rows 10000 --workers 1 2 3
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_svm import prepare_fmnist  # noqa: E402

REPO = Path(os.environ.get("ACCEL_REPO", Path(__file__).resolve().parent.parent))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def svs(model):
    lines = Path(model).read_text().splitlines()
    return {" ".join(t for t in l.split() if ":" in t) for l in lines[lines.index("SV") + 1:]}


def single(args, train, model, common):
    env = dict(os.environ, OMP_NUM_THREADS=str(os.cpu_count()))
    rss = Path(model).with_suffix(".rss")
    t0 = time.time()
    out = subprocess.run([*timed(rss), args.accel, "svm-train", *common, "--json", str(train), str(model)], env=env,
                         check=True, capture_output=True, text=True).stdout
    wall = time.time() - t0
    info = json.loads(out)
    return {"fit": info["seconds"]["total"], "solver": info["seconds"]["total"], "wall": wall,
            "obj": info["problems"][0]["obj"],
            "rounds": info["problems"][0]["rounds"], "mb": peak_mb(rss), "nnz_per_row": info.get("nnz_per_row")}


def timed(path):
    """/usr/bin/time writing the peak RSS (KiB) to `path`."""
    return ["/usr/bin/time", "-f", "%M", "-o", str(path)]


def peak_mb(path):
    return int(Path(path).read_text().split()[-1]) / 1024


def distributed(args, train, model, common, workers, log):
    cpus = os.cpu_count()
    per = max(1, cpus // workers)  # cores (and threads) per worker
    env = dict(os.environ, OMP_NUM_THREADS="1")
    wenv = dict(os.environ, OMP_NUM_THREADS=str(per))
    port = free_port()
    pin = lambda w: ["taskset", "-c", ",".join(str(((w - 1) * per + c) % cpus) for c in range(per))]  # noqa: E731
    rss = Path(log).with_suffix(".rss")
    t0 = time.time()
    coord = subprocess.Popen([*timed(f"{rss}.0"), args.accel, "coordinator", "svm-train", *common, "--workers", str(workers),
                              "--listen", f"127.0.0.1:{port}", "--log-json", str(log), "--json", "--device", "cpu",
                              *(["--pull"] if args.pull else []),
                              str(train), str(model)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    procs = [subprocess.Popen([*timed(f"{rss}.{w}"), *pin(w), args.accel, "worker", "--coordinator", f"127.0.0.1:{port}", "--id", str(w),
                               "--device", "cpu"], env=wenv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for w in range(1, workers + 1)]
    out, err = coord.communicate(timeout=3600)
    wall = time.time() - t0
    for p in procs:
        p.wait(timeout=60)
    if coord.returncode != 0:
        raise SystemExit(f"distributed run failed: {err[-800:]}")
    s = json.loads(out.splitlines()[0])
    return {"fit": s["seconds"]["job"], "solver": s["seconds"]["solver"]["total"], "wall": wall,
            "obj": s["problems"][0]["obj"],
            "rounds": s["problems"][0]["rounds"], "rows": s["rows"], "coord_mb": peak_mb(f"{rss}.0"),
            "worker_mb": max(peak_mb(f"{rss}.{w}") for w in range(1, workers + 1))}


def nonzeros_per_row(train):
    rows = nnz = 0
    with open(train) as f:
        for line in f:
            if line.strip():
                rows += 1
                nnz += line.count(":")
    return nnz / max(rows, 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10000)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--accel", default=str(REPO / "build" / "bin" / "accel"))
    ap.add_argument("--data-dir", default=str(REPO / "build" / "bench_svm_data"))
    ap.add_argument("--pull", action="store_true",
                    help="workers read the training file themselves (shared storage); the coordinator pushes nothing")
    args = ap.parse_args()
    data = Path(args.data_dir)
    data.mkdir(parents=True, exist_ok=True)
    train, _, _ = prepare_fmnist(data, args.rows)
    common = ["-c", "10", "-g", "0.02", "-e", "1e-3", "-m", "100"]
    print(f"host: {os.cpu_count()} CPUs; Fashion-MNIST even/odd, {args.rows} rows; medians of {args.repeat}; "
          f"{'--pull' if args.pull else 'push'}")
    results = {}
    for rep in range(args.repeat):
        r = single(args, train, data / "single.model", common)
        results.setdefault("single", []).append(r)
        print(f"  single-node 2 threads: fit {r['fit']:.2f} s wall {r['wall']:.2f} s", flush=True)
        for w in args.workers:
            r = distributed(args, train, data / f"dist{w}.model", common, w, data / f"dist{w}.jsonl")
            results.setdefault(w, []).append(r)
            print(f"  coordinator + {w} worker(s): fit {r['fit']:.2f} s wall {r['wall']:.2f} s rows {r['rows']}",
                  flush=True)
    ref = results["single"]
    base_fit = statistics.median(r["fit"] for r in ref)
    base_wall = statistics.median(r["wall"] for r in ref)
    base_svs = svs(data / "single.model")
    nnz_row = nonzeros_per_row(train)
    base_solver = statistics.median(r["solver"] for r in ref)
    # fit: single-node's training (its read of the file excluded) against the
    # job's (measuring, the workers' read or parse of their rows, the
    # rounds); solver: the training alone on both sides; wall: each command
    # from start to exit, reading included on both sides.
    print(f"\n{'run':<28}{'fit s':>8}{'wall s':>8}{'fit / single':>14}{'solver / single':>17}{'wall / single':>15}"
          f"{'rounds':>8}{'rel obj':>10}{'SV diff':>9}{'RSS MB':>8}{'worker MB':>11}{'coord bound':>13}")
    print(f"{'single-node, 2 threads':<28}{base_fit:>8.2f}{base_wall:>8.2f}{'1.00':>14}{'1.00':>17}{'1.00':>15}"
          f"{ref[0]['rounds']:>8}{'-':>10}{'-':>9}{statistics.median(r['mb'] for r in ref):>8.0f}{'-':>11}{'-':>13}")
    for w in args.workers:
        rs = results[w]
        fit = statistics.median(r["fit"] for r in rs)
        wall = statistics.median(r["wall"] for r in rs)
        rel = abs(rs[0]["obj"] - ref[0]["obj"]) / abs(ref[0]["obj"])
        diff = len(svs(data / f"dist{w}.model") ^ base_svs)
        coord = statistics.median(r["coord_mb"] for r in rs)
        # The coordinator's own rows as CSR (8-byte row pointer, 4-byte index
        # and value a non-zero) + -m 100 + 150 MB.
        bound = rs[0]["rows"][0] * (8 + 8 * nnz_row) / 1e6 + 100 + 150
        solver = statistics.median(r["solver"] for r in rs)
        print(f"{'coordinator + ' + str(w) + ' worker(s)':<28}{fit:>8.2f}{wall:>8.2f}{fit / base_fit:>14.2f}"
              f"{solver / base_solver:>17.2f}{wall / base_wall:>15.2f}{rs[0]['rounds']:>8}{rel:>10.1e}{diff:>9}{coord:>8.0f}"
              f"{statistics.median(r['worker_mb'] for r in rs):>11.0f}{bound:>9.0f} {'ok' if coord <= bound else 'MISSED'}")


if __name__ == "__main__":
    main()
