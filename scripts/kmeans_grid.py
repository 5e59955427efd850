"""The roofline grid of bench_kmeans.py --grid: Lloyd iterations over many
shapes against the machine's limit for each, beside scikit-learn,
scikit-learn-intelex (oneDAL) and FAISS.

A shape's limit is max(bytes read / read bandwidth, 2 n k d / sgemm rate),
both measured by `accel calibrate` in the same run: one read of X and the
distance flops of one assignment pass. Every method starts from the same
initial centroids and runs Lloyd iterations with the same threads. A
method's seconds per iteration is the steady state. accel logs every
iteration's time (--log-json): the median of those after the first. For
the peers, which do not: where a shape's limit
is under --grid-cheap-ms, the difference of two fits (N and 2N iterations,
N up to 40 so that the fits take ~0.1 s) over the difference of their
iteration counts, the median of three such pairs, so that no method's set-up (threads, page faults, the
first launch's timed choice of loop) is charged to its iterations; above
it, one fit of --grid-iters iterations, whose set-up is then negligible.
accel's pruned algorithm (--algorithm yinyang) is a separate column: it
skips distances, so it can beat the Lloyd limit, which is a bonus and not
the measure.

Printed per shape: the limit, accel's time per iteration and its fraction
of the limit, each peer's time per iteration, accel's ratio to the fastest
peer, and accel's inertia against a float64 recomputation at its final
centroids. A PNG heat map of accel's fraction of the limit is drawn with
--grid-png.
"""

import json
import os
import subprocess
import time
from pathlib import Path

import numpy as np

# One float64 inertia and one thread environment for both benchmarks.
from bench_kmeans import exact_inertia, thread_env  # noqa: E402

D_VALUES = [2, 3, 4, 8, 16, 32, 64, 128, 256, 784]
K_VALUES = [4, 8, 16, 64, 256, 1024]


def rows_for(d, n_small, n_large):
    return n_large if d >= 256 else n_small


def make_data(n, d, seed=7):
    """n rows around 32 Gaussian centers (the time of a Lloyd pass does not
    depend on the data's shape; this keeps the clusters non-degenerate)."""
    rng = np.random.default_rng(seed)
    centers = rng.uniform(-5, 5, size=(32, d)).astype(np.float32)
    out = np.empty((n, d), dtype=np.float32)
    step = max(1, (1 << 24) // d)
    for s in range(0, n, step):
        m = min(step, n - s)
        out[s:s + m] = centers[rng.integers(0, 32, size=m)] + rng.standard_normal((m, d), dtype=np.float32)
    return out


def steady(fit, iters, limit, cheap_s):
    """Seconds per iteration of fit(iters) -> (seconds, iterations run)."""
    if limit >= cheap_s:
        t, it = fit(iters)
        return t / max(1, it)
    n1 = int(min(40, max(iters, 0.1 / (4 * limit))))
    per = []
    for _ in range(3):  # the median of three: one pair's difference carries twice a fit's noise
        t1, i1 = fit(n1)
        t2, i2 = fit(2 * n1)
        if i2 <= i1 or t2 <= t1:  # converged before n1 iterations: the longer fit did no more work
            per.append(t2 / max(1, i2))
        else:
            per.append((t2 - t1) / (i2 - i1))
    return sorted(per)[1]


def run_accel(accel, x_path, c0_path, k, iters, threads, algorithm, out_dir):
    cent = out_dir / "accel-centroids.npy"
    log = out_dir / "accel-iterations.jsonl"
    cmd = [accel, "kmeans", "--input", x_path, "--k", k, "--max-iter", iters, "--tol", 0, "--init", c0_path,
           "--device", "cpu", "--algorithm", algorithm, "--json", "--output-centroids", cent, "--log-json", log]
    p = subprocess.run([str(c) for c in cmd], env=thread_env(threads), capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"accel kmeans exited {p.returncode}: {p.stderr.strip()}")
    out = json.loads(p.stdout)
    per = sorted(json.loads(line)["seconds"] for line in log.read_text().splitlines())
    # Iterations after the first: the first launch of a shape pays the page
    # faults of the input and the timed choice of loop.
    steady_s = per[1:][len(per[1:]) // 2] if len(per) > 1 else per[0]
    return {"seconds": out["seconds"]["total"], "iterations": out["iterations"], "inertia": out["inertia"],
            "centroids": np.load(cent), "steady_s": steady_s}


def run_sklearn(kmeans_cls, x, c0, iters):
    km = kmeans_cls(n_clusters=len(c0), init=c0, n_init=1, max_iter=iters, tol=0, algorithm="lloyd")
    t0 = time.perf_counter()
    km.fit(x)
    return time.perf_counter() - t0, int(km.n_iter_)


def run_faiss(x, c0, iters):
    """FAISS logs each iteration's cumulative time (iteration_stats): the
    median of the iterations after the first, as for accel. (The two-fit
    difference put FAISS below the read limit on some shapes: its set-up
    varies more than its iterations take.)"""
    import faiss
    km = faiss.Kmeans(x.shape[1], len(c0), niter=max(iters, 4), verbose=False, max_points_per_centroid=len(x),
                      seed=1)
    km.train(x, init_centroids=c0)
    t = [s["time"] for s in km.iteration_stats]
    per = sorted(b - a for a, b in zip(t[1:], t[2:]))
    return per[len(per) // 2]


def peers(threads):
    """(name, callable(x, c0, iters)) for each peer installed: (seconds,
    iterations) of a fit, or for FAISS its steady seconds per iteration."""
    out = []
    from threadpoolctl import threadpool_limits

    def limited(fn):
        def run(*a):
            with threadpool_limits(limits=threads):
                return fn(*a)
        return run

    try:
        from sklearn.cluster import KMeans
        out.append(("sklearn", limited(lambda x, c0, it: run_sklearn(KMeans, x, c0, it))))
    except ImportError:
        pass
    try:
        from sklearnex.cluster import KMeans as KMeansEx
        out.append(("sklearnex", limited(lambda x, c0, it: run_sklearn(KMeansEx, x, c0, it))))
    except ImportError:
        pass
    try:
        import faiss
        faiss.omp_set_num_threads(threads)
        out.append(("faiss", lambda x, c0, it: run_faiss(x, c0, it)))
    except ImportError:
        pass
    return out


def run_grid(args, calib, recalibrate=None):
    d_values = [int(v) for v in args.grid_d.split(",")] if args.grid_d else D_VALUES
    k_values = [int(v) for v in args.grid_k.split(",")] if args.grid_k else K_VALUES
    data_dir = Path(args.data_dir) / "grid"
    data_dir.mkdir(parents=True, exist_ok=True)
    read_bps, flops = calib["read_gbps"] * 1e9, calib["sgemm_gflops"] * 1e9
    peer_list = [] if args.grid_no_peers else peers(args.threads)
    names = [p[0] for p in peer_list]
    print(f"\n== roofline grid: {args.grid_iters} Lloyd iterations a shape, rows {args.grid_n} "
          f"({args.grid_n_large} where d >= 256); peers: {', '.join(names) or 'none'}")
    head = f"{'d':>4} {'K':>5} {'n':>8} {'limit ms':>9} {'accel ms':>9} {'of limit':>8}"
    head += "".join(f" {n + ' ms':>12}" for n in names) + f" {'vs best':>8} {'yinyang ms':>11} {'inertia rel':>11}"
    print(head)
    results = []
    for d in d_values:
        n = rows_for(d, args.grid_n, args.grid_n_large)
        x_path = data_dir / f"x-n{n}-d{d}.npy"
        if not x_path.exists():
            tmp = x_path.with_suffix(".tmp.npy")
            np.save(tmp, make_data(n, d))
            os.replace(tmp, x_path)
        x = np.load(x_path)
        for k in k_values:
            c0_path = data_dir / f"c0-n{n}-d{d}-k{k}.npy"
            c0 = x[np.random.default_rng(0).choice(n, size=k, replace=False)]
            np.save(c0_path, c0)
            limit = max(4.0 * n * d / read_bps, 2.0 * n * k * d / flops)
            cheap = args.grid_cheap_ms / 1e3
            # accel logs each iteration's time: the median of those after the
            # first, from one fit of N iterations (N as the peers' pairs use).
            n_acc = int(min(40, max(args.grid_iters, 0.1 / (4 * limit)))) if limit < cheap else args.grid_iters
            a = run_accel(args.accel, x_path, c0_path, k, n_acc, args.threads, "lloyd", data_dir)
            exact = exact_inertia(x, a["centroids"])
            rel = abs(a["inertia"] - exact) / exact
            row = {"d": d, "k": k, "n": n, "limit_s": limit, "accel_s": a["steady_s"],
                   "fraction": limit / a["steady_s"], "inertia_rel": rel, "peers": {}}
            for name, fn in peer_list:
                if name == "faiss":
                    row["peers"][name] = fn(x, c0, n_acc)
                else:
                    row["peers"][name] = steady(lambda it: fn(x, c0, it), args.grid_iters, limit, cheap)
            if args.grid_pruned:
                row["yinyang_s"] = run_accel(args.accel, x_path, c0_path, k, n_acc, args.threads, "yinyang",
                                             data_dir)["steady_s"]
            best = min(row["peers"].values()) if row["peers"] else None
            row["vs_best_peer"] = best / row["accel_s"] if best else None
            line = (f"{d:>4} {k:>5} {n:>8} {limit * 1e3:>9.2f} {row['accel_s'] * 1e3:>9.2f}"
                    f" {row['fraction'] * 100:>7.0f}%")
            line += "".join(f" {row['peers'][nm] * 1e3:>12.2f}" for nm in names)
            line += f" {row['vs_best_peer']:>7.2f}x" if best else f" {'-':>8}"
            line += f" {row['yinyang_s'] * 1e3:>11.2f}" if "yinyang_s" in row else f" {'-':>11}"
            line += f" {rel:>11.1e}"
            print(line, flush=True)
            results.append(row)
    if recalibrate:
        # The limit from the machine at its best: the higher of the rates
        # measured before and after the grid (a calibration while something
        # else ran had put the limits 30% high).
        again = recalibrate()
        best = {"read_gbps": max(calib["read_gbps"], again["read_gbps"]),
                "sgemm_gflops": max(calib["sgemm_gflops"], again["sgemm_gflops"])}
        print(f"\ncalibration before {calib}, after {again}; the limits below take the best of each")
        for r in results:
            r["limit_s"] = max(4.0 * r["n"] * r["d"] / (best["read_gbps"] * 1e9),
                               2.0 * r["n"] * r["k"] * r["d"] / (best["sgemm_gflops"] * 1e9))
            r["fraction"] = r["limit_s"] / r["accel_s"]
    for r in results:  # a peer faster than the limit was mis-timed: left out of the ratio
        ok = [v for v in r["peers"].values() if v >= 0.9 * r["limit_s"]]
        r["vs_best_peer"] = min(ok) / r["accel_s"] if ok else None
        r["peers_below_limit"] = [nm for nm, v in r["peers"].items() if v < 0.9 * r["limit_s"]]
    print(f"{'d':>4} {'K':>5} {'limit ms':>9} {'accel ms':>9} {'of limit':>8} {'vs best':>8}")
    for r in results:
        vs = f"{r['vs_best_peer']:>7.2f}x" if r["vs_best_peer"] else f"{'-':>8}"
        bad = f"  ({', '.join(r['peers_below_limit'])} timed below the limit: left out)" if r["peers_below_limit"] else ""
        print(f"{r['d']:>4} {r['k']:>5} {r['limit_s'] * 1e3:>9.2f} {r['accel_s'] * 1e3:>9.2f}"
              f" {r['fraction'] * 100:>7.0f}% {vs}{bad}")
    fr = sorted(r["fraction"] for r in results)
    summary = {"median_fraction": fr[len(fr) // 2], "min_fraction": fr[0]}
    ratios = [r["vs_best_peer"] for r in results if r["vs_best_peer"]]
    if ratios:
        summary["min_vs_best_peer"] = min(ratios)
    summary["max_inertia_rel"] = max(r["inertia_rel"] for r in results)
    print(f"\ngrid: median fraction of the limit {summary['median_fraction'] * 100:.0f}% (target >= 70%), "
          f"lowest {summary['min_fraction'] * 100:.0f}% (target >= 40%)"
          + (f"; lowest ratio to the fastest peer {summary['min_vs_best_peer']:.2f}x (target >= 1.3x)"
             if ratios else "")
          + f"; largest inertia error {summary['max_inertia_rel']:.1e} (target <= 1e-6)")
    if args.grid_png:
        draw(results, d_values, k_values, args.grid_png)
    return {"shapes": results, "summary": summary}


def draw(results, d_values, k_values, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    grid = np.full((len(d_values), len(k_values)), np.nan)
    for r in results:
        grid[d_values.index(r["d"]), k_values.index(r["k"])] = r["fraction"] * 100
    fig, ax = plt.subplots(figsize=(7, 6))
    im = ax.imshow(grid, cmap="viridis", vmin=0, vmax=max(100, np.nanmax(grid)), origin="lower")
    ax.set_xticks(range(len(k_values)), [str(k) for k in k_values])
    ax.set_yticks(range(len(d_values)), [str(d) for d in d_values])
    ax.set_xlabel("K")
    ax.set_ylabel("d")
    for i in range(len(d_values)):
        for j in range(len(k_values)):
            if not np.isnan(grid[i, j]):
                ax.text(j, i, f"{grid[i, j]:.0f}", ha="center", va="center", color="w", fontsize=8)
    fig.colorbar(im, label="accel Lloyd iteration, % of the machine's limit")
    ax.set_title("accel k-means: fraction of max(read, sgemm) limit")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"heat map: {path}")
