#!/usr/bin/env python3
"""accel.dask.KMeans against single-node accel.sklearn.KMeans, side by side.

A 4-worker dask.distributed LocalCluster; the data (blobs, N x D float32 in
CHUNKS chunks) is generated on the workers, so it never exists in the
client. Each fit runs in a fresh process: the client's peak RSS is its own.
The single-node fit computes the same array locally (dask's threaded
scheduler; the same values) and fits it with init='k-means||' and the same
random_state. Prints the median times of --repeats runs, their ratio, the
centroids' largest relative difference, and the client's peak RSS against
the array's bytes.

  PYTHONPATH=build/python ACCEL_BIN=build/bin/accel scripts/bench_dask.py
"""
import argparse
import json
import resource
import statistics
import subprocess
import sys
import time

import numpy as np


def data(n, d, chunks, k, seed):
    import dask.array as da
    rng = np.random.default_rng(seed)
    centers = rng.normal(0, 8, (k, d)).astype(np.float32)
    rows = -(-n // chunks)

    def block(b, block_id=None):
        r = np.random.default_rng(seed * 1000 + block_id[0])
        m = b.shape[0]
        return (centers[r.integers(0, k, m)] + r.normal(0, 1, (m, d))).astype(np.float32)

    return da.zeros((n, d), chunks=(rows, d), dtype=np.float32).map_blocks(block, dtype=np.float32)


def child(args):
    import accel.sklearn
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    X = data(args.n, args.d, args.chunks, args.k, args.seed)
    if args.child == "dask":
        from distributed import Client, LocalCluster
        import accel.dask
        with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                          dashboard_address=None) as cluster, Client(cluster) as client:
            from distributed import wait
            X = X.persist()  # in the workers' memory before the clock starts, as the local fit's x is
            wait(X)
            client.run(lambda: __import__("accel.dask"))  # imported, as accel.sklearn is here before its clock
            base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
            t = time.perf_counter()
            km = accel.dask.KMeans(args.k, random_state=args.seed, client=client).fit(X)
            seconds = time.perf_counter() - t
    else:
        x = X.compute(scheduler="threads")
        base = before
        t = time.perf_counter()
        km = accel.sklearn.KMeans(args.k, init="k-means||", n_init=1, random_state=args.seed).fit(x)
        seconds = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"seconds": seconds, "centers": km.cluster_centers_.tolist(), "n_iter": int(km.n_iter_),
                      "peak_rss": peak, "rss_before_fit": base}))


def run(kind, args):
    cmd = [sys.executable, __file__, "--child", kind] + [f"--{a}={getattr(args, a)}" for a in
                                                          ("n", "d", "chunks", "k", "seed", "workers")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        sys.exit(f"{kind} run failed: {r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=2_000_000)
    p.add_argument("--d", type=int, default=32)
    p.add_argument("--chunks", type=int, default=16)
    p.add_argument("--k", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--child", choices=["dask", "single"])
    args = p.parse_args()
    if args.child:
        return child(args)
    dask_runs, single_runs = [], []
    for _ in range(args.repeats):  # interleaved: the host's noise falls on both
        dask_runs.append(run("dask", args))
        single_runs.append(run("single", args))
    td = statistics.median(r["seconds"] for r in dask_runs)
    ts = statistics.median(r["seconds"] for r in single_runs)
    ref = np.array(single_runs[0]["centers"])
    worst = max(float(np.max(np.abs(np.array(r["centers"]) - ref) / np.maximum(np.abs(ref), 1e-30)))
                for r in dask_runs + single_runs)
    array_bytes = args.n * args.d * 4
    peak = max(r["peak_rss"] for r in dask_runs)
    grew = max(r["peak_rss"] - r["rss_before_fit"] for r in dask_runs)
    print(f"{args.n} x {args.d} float32 ({array_bytes / 1e6:.0f} MB) in {args.chunks} chunks, k = {args.k}, "
          f"{args.workers} dask workers, median of {args.repeats}")
    each = lambda runs: ", ".join(f"{r['seconds']:.2f}" for r in runs)  # noqa: E731
    print(f"accel.dask.KMeans fit:      {td:.2f} s ({each(dask_runs)})")
    print(f"accel.sklearn.KMeans fit:   {ts:.2f} s ({each(single_runs)})")
    print(f"ratio dask / single-node:   {td / ts:.2f}x")
    print(f"iterations: dask {[r['n_iter'] for r in dask_runs]}, single-node {[r['n_iter'] for r in single_runs]}")
    print(f"centroids: largest relative difference {worst:.1e}")
    print(f"client peak RSS {peak / 1e6:.0f} MB = {100 * peak / array_bytes:.0f}% of the array; "
          f"grew {grew / 1e6:.0f} MB during the fit ({100 * grew / array_bytes:.1f}%)")


if __name__ == "__main__":
    main()
