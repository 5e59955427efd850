#!/usr/bin/env python3
"""Side-by-side k-means benchmark: scikit-learn, scikit-learn-intelex, FAISS,
accel (the CLI) and accel.sklearn (its Python estimator, in this process).

All start from the same initial centroids and run a fixed number of Lloyd
iterations with the same thread count, so their times and final inertias
are directly comparable. The Python estimator's fit() is also set against
the CLI's compute time (target: at most 5% more). Run it with the benchmark venv's python
(scripts/setup_bench.sh creates it):

    .bench-venv/bin/python scripts/bench_kmeans.py --quick
    .bench-venv/bin/python scripts/bench_kmeans.py --grid --grid-png grid.png

--grid runs the roofline grid instead (kmeans_grid.py says what it measures).

The accel binary's own `calibrate` subcommand measures this machine's sgemm
rate and streaming read bandwidth in the same run, so the efficiency
percentages are relative to what the hardware delivers right now, not to a
datasheet figure.

Inputs are cached as .npy files under --data-dir; ACCEL_REPO overrides the
repository root that the defaults of --accel and --data-dir derive from
(otherwise the parent of this script's directory).

Exit status: 0 when every method ran (performance targets missed or not, since
this is a benchmark, not a test), 1 when accel failed.
"""

import argparse
import gzip
import json
import os
import platform
import struct
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import faiss
import numpy as np
import sklearn
from sklearn.cluster import KMeans
from threadpoolctl import threadpool_limits

REPO = Path(os.environ.get("ACCEL_REPO") or Path(__file__).resolve().parent.parent)
FMNIST_IMAGES = Path("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")

# Pass/fail thresholds. Each case has one speed target relative to sklearn and
# one efficiency target against the hardware bound that limits that shape:
# fmnist (d=784, K=256) is dominated by the distance GEMM, blobs (d=2, K=4) by
# streaming X through memory.
TARGETS = {
    "fmnist": {"speedup": 1.3, "metric": "sgemm_pct", "min_pct": 80.0},
    "blobs": {"speedup": 5.0, "metric": "read_pct", "min_pct": 50.0},
}
MAX_REL_INERTIA_DIFF = 1e-4


@dataclass
class Case:
    name: str
    k: int
    max_iter: int
    n: int


# ---------------------------------------------------------------- data sets


def load_fmnist(n_rows):
    """First n_rows Fashion-MNIST training images as float32 in [0, 1]."""
    with gzip.open(FMNIST_IMAGES, "rb") as f:
        raw = f.read()
    magic, count, rows, cols = struct.unpack(">IIII", raw[:16])
    if magic != 0x00000803:
        raise ValueError(f"{FMNIST_IMAGES}: bad IDX magic {magic:#010x}")
    if n_rows > count:
        raise ValueError(f"{FMNIST_IMAGES} has {count} images, {n_rows} requested")
    pixels = np.frombuffer(raw, dtype=np.uint8, count=n_rows * rows * cols, offset=16)
    return pixels.reshape(n_rows, rows * cols).astype(np.float32) / np.float32(255)


def make_blobs(n):
    """n points in 2-D around 4 unit-variance Gaussian centers in [-10, 10]^2."""
    rng = np.random.default_rng(42)
    centers = rng.uniform(-10, 10, size=(4, 2)).astype(np.float32)
    labels = rng.integers(0, 4, size=n)
    return centers[labels] + rng.standard_normal((n, 2), dtype=np.float32)


def save_npy(path, array):
    # Write under a temporary name first so that an interrupted run never
    # leaves a truncated file that later runs would take as a valid cache.
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        np.save(f, np.ascontiguousarray(array, dtype=np.float32))
    os.replace(tmp, path)


def cached_npy(path, make):
    if not path.exists():
        print(f"  generating {path}", flush=True)
        save_npy(path, make())
    return np.load(path)


def pick_init(x, k):
    """K rows of x with pairwise different values, chosen with seed 0.

    Distinct row *values* (not just indices) matter: two identical initial
    centroids would tie for every point, leaving one cluster empty, and each
    implementation resolves empty clusters differently.
    """
    rng = np.random.default_rng(0)
    chosen, seen = [], set()
    for i in rng.permutation(len(x)):
        key = x[i].tobytes()
        if key not in seen:
            seen.add(key)
            chosen.append(i)
            if len(chosen) == k:
                return x[np.array(chosen)]
    raise ValueError(f"data has fewer than {k} distinct rows")


def prepare(case, data_dir):
    """Return (x, c0, x_path, c0_path), generating the cached files if missing."""
    stem = f"{case.name}-n{case.n}"
    x_path = data_dir / f"{stem}.npy"
    c0_path = data_dir / f"{stem}-init-k{case.k}.npy"
    make = {"fmnist": lambda: load_fmnist(case.n), "blobs": lambda: make_blobs(case.n)}
    x = cached_npy(x_path, make[case.name])
    c0 = cached_npy(c0_path, lambda: pick_init(x, case.k))
    return x, c0, x_path, c0_path


# ---------------------------------------------------------------- methods


def run_sklearn(x, c0, case):
    km = KMeans(n_clusters=case.k, init=c0, n_init=1, max_iter=case.max_iter,
                tol=0, algorithm="lloyd")
    start = time.perf_counter()
    km.fit(x)
    seconds = time.perf_counter() - start
    # sklearn stops early when the labels stop changing. When it does not, it
    # runs one extra assignment pass so that labels_ match the final centers,
    # exactly like accel's final pass; count it the same way for fairness.
    passes = int(km.n_iter_) + (1 if km.n_iter_ == case.max_iter else 0)
    # sklearn sums inertia_ in float32 for float32 input: on blobs it is off
    # by 3e-5 relative at 1M points and 2.6e-3 at 10M, far beyond the 1e-4
    # agreement target, so it cannot be the reference. Kept for information.
    return {"iterations": int(km.n_iter_), "passes": passes, "seconds": seconds,
            "inertia": exact_inertia(x, km.cluster_centers_),
            "reported_inertia": float(km.inertia_)}


def run_sklearnex(x, c0, case):
    from sklearnex.cluster import KMeans as IntelKMeans
    km = IntelKMeans(n_clusters=case.k, init=c0, n_init=1, max_iter=case.max_iter, tol=0, algorithm="lloyd")
    start = time.perf_counter()
    km.fit(x)
    seconds = time.perf_counter() - start
    passes = int(km.n_iter_) + (1 if km.n_iter_ == case.max_iter else 0)
    return {"iterations": int(km.n_iter_), "passes": passes, "seconds": seconds,
            "inertia": exact_inertia(x, km.cluster_centers_)}


def run_accel_python(x, c0, case):
    """accel.sklearn.KMeans in this process (x is float32 in C order: used in place)."""
    sys.path.insert(0, str(REPO / "build" / "python"))
    from accel.sklearn import KMeans as AccelKMeans
    km = AccelKMeans(n_clusters=case.k, init=c0, max_iter=case.max_iter, tol=0, algorithm="lloyd", device="cpu")
    start = time.perf_counter()
    km.fit(x)
    seconds = time.perf_counter() - start
    return {"iterations": int(km.n_iter_), "passes": int(km.n_iter_) + 1, "seconds": seconds,
            "inertia": exact_inertia(x, km.cluster_centers_)}


def exact_inertia(x, centroids):
    """Sum of squared distances to the nearest centroid, all in float64.

    The reference must be far more precise than the 1e-4 agreement target:
    summing millions of float32 distances in float32 is not (see run_sklearn).
    Float64 also makes the expanded form |x|^2 - 2x.c + |c|^2 safe from
    cancellation, so the distances can come from one GEMM per block.
    """
    c = np.asarray(centroids, dtype=np.float64)
    c_sq = (c * c).sum(axis=1)
    rows = max(1, (1 << 22) // x.shape[1])  # ~32 MiB of float64 per block
    total = 0.0
    for s in range(0, len(x), rows):
        block = x[s:s + rows].astype(np.float64)
        dist = (block * block).sum(axis=1) + (c_sq - 2.0 * (block @ c.T)).min(axis=1)
        total += float(np.maximum(dist, 0.0).sum())
    return total


def run_faiss(x, c0, case):
    n, d = x.shape
    # max_points_per_centroid=n disables FAISS's default subsampling of the
    # training set, so it does the same work per iteration as the others.
    km = faiss.Kmeans(d, case.k, niter=case.max_iter, verbose=False,
                      max_points_per_centroid=n, seed=1)
    start = time.perf_counter()
    km.train(x, init_centroids=c0)
    seconds = time.perf_counter() - start
    # FAISS always runs niter iterations and never assigns against the final
    # centroids, so that pass is done here, outside the timed region.
    return {"iterations": case.max_iter, "passes": case.max_iter,
            "seconds": seconds, "inertia": exact_inertia(x, km.centroids)}


def thread_env(threads):
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)
    return env


class AccelError(RuntimeError):
    pass


def run_accel_json(cmd, threads):
    """Run an accel subcommand that prints one JSON object; return (obj, wall s)."""
    start = time.perf_counter()
    proc = subprocess.run([str(c) for c in cmd], env=thread_env(threads),
                          capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise AccelError(f"{' '.join(map(str, cmd))} exited with {proc.returncode}:\n"
                         f"{proc.stderr.strip()}")
    try:
        return json.loads(proc.stdout), wall
    except json.JSONDecodeError as e:
        raise AccelError(f"{cmd[1]}: stdout is not one JSON object ({e}):\n"
                         f"{proc.stdout[:2000]}") from None


def run_accel(accel, x_path, c0_path, case, threads):
    # --algorithm lloyd: this benchmark compares the assignment pass for pass
    # with scikit-learn's and FAISS's Lloyd (and its "% sgemm" column counts
    # Lloyd's flops). The pruned default (bounds skip most distances on
    # Fashion-MNIST) is measured end to end by bench_spark.py.
    out, wall = run_accel_json(
        [accel, "kmeans", "--input", x_path, "--k", case.k, "--max-iter", case.max_iter,
         "--tol", 0, "--init", c0_path, "--device", "cpu", "--algorithm", "lloyd", "--json"], threads)
    try:
        return {"iterations": int(out["iterations"]),
                # accel's reported inertia comes from a final assignment pass
                # against the final centroids, timed within seconds.total, so
                # it assigns iterations+1 times in all.
                "passes": int(out["iterations"]) + 1,
                "seconds": float(out["seconds"]["total"]),
                "inertia": float(out["inertia"]),
                "wall_seconds": wall,
                "accel_seconds": out["seconds"],
                "devices": out.get("devices")}
    except (KeyError, TypeError, ValueError) as e:
        raise AccelError(f"accel kmeans JSON lacks or mistypes {e}: {out}") from None


def calibrate(accel, threads):
    out, _ = run_accel_json([accel, "calibrate", "--json", "--threads", threads], threads)
    try:
        return {"sgemm_gflops": float(out["sgemm_gflops"]),
                "read_gbps": float(out["read_gbps"])}
    except (KeyError, TypeError, ValueError) as e:
        raise AccelError(f"accel calibrate JSON lacks or mistypes {e}: {out}") from None


# ---------------------------------------------------------------- reporting


def add_derived(rows, n, d, k, calib):
    """Per-iteration time, speedup and efficiency, all relative to sklearn.

    Speedup compares time per iteration, since sklearn may stop early.
    GFLOP/s counts only the distance GEMM (2*n*d*K flops per assignment pass),
    GB/s only one read of X per pass: these are the bounds that matter for the
    two shapes benchmarked, and both ignore the cheaper centroid update.
    """
    ref = rows.get("sklearn")
    for r in rows.values():
        r["sec_per_iter"] = r["seconds"] / max(r["iterations"], 1)
        r["gflops"] = 2.0 * n * d * k * r["passes"] / r["seconds"] / 1e9
        r["gbps"] = 4.0 * n * d * r["passes"] / r["seconds"] / 1e9
        if calib:
            r["sgemm_pct"] = 100.0 * r["gflops"] / calib["sgemm_gflops"]
            r["read_pct"] = 100.0 * r["gbps"] / calib["read_gbps"]
        if ref:
            r["speedup"] = ref["sec_per_iter"] / r["sec_per_iter"]
            r["rel_inertia_diff"] = (r["inertia"] - ref["inertia"]) / ref["inertia"]


def print_table(rows):
    header = (f"  {'method':<9} {'iters':>5} {'seconds':>9} {'s/iter':>9} {'speedup':>7}"
              f" {'inertia':>16} {'rel.diff':>9} {'GFLOP/s':>8} {'%sgemm':>6}"
              f" {'GB/s':>7} {'%read':>6}")
    print(header)
    print("  " + "-" * (len(header) - 2))

    def fmt(r, key, spec, suffix=""):
        return format(r[key], spec) + suffix if key in r else "-"

    for name, r in rows.items():
        print(f"  {name:<9} {r['iterations']:>5} {r['seconds']:>9.3f} {r['sec_per_iter']:>9.4f}"
              f" {fmt(r, 'speedup', '.2f', 'x'):>7} {r['inertia']:>16.6g}"
              f" {fmt(r, 'rel_inertia_diff', '>9.1e'):>9} {r['gflops']:>8.1f}"
              f" {fmt(r, 'sgemm_pct', '>6.1f'):>6} {r['gbps']:>7.2f} {fmt(r, 'read_pct', '>6.1f'):>6}")
    if "sklearn" in rows:
        print(f"  sklearn's own inertia_ (float32 sum): {rows['sklearn']['reported_inertia']:.9g};"
              f" the table shows float64 inertias of each method's final centroids")
    if "accel" in rows:
        a = rows["accel"]
        print(f"  accel wall time {a['wall_seconds']:.3f} s (process start and loading"
              f" included); seconds {a['accel_seconds']}; devices {a['devices']}")
        if "accel-py" in rows:
            py = rows["accel-py"]
            print(f"  accel.sklearn fit {py['seconds']:.3f} s against the CLI's compute {a['seconds']:.3f} s:"
                  f" overhead {100 * (py['seconds'] / a['seconds'] - 1):+.1f}% (target <= 5%)")


def check_targets(case_name, rows):
    """Return [(passed, description)] for the case's targets."""
    a = rows.get("accel")
    if a is None:
        return [(False, f"{case_name}: no accel result")]
    t = TARGETS[case_name]
    checks = [(a["speedup"] >= t["speedup"],
               f"{case_name}: accel speedup vs sklearn {a['speedup']:.2f}x >= {t['speedup']}x")]
    if t["metric"] in a:
        what = {"sgemm_pct": "calibrated sgemm rate", "read_pct": "calibrated read bandwidth"}
        checks.append((a[t["metric"]] >= t["min_pct"],
                       f"{case_name}: accel at {a[t['metric']]:.1f}% of {what[t['metric']]}"
                       f" >= {t['min_pct']:.0f}%"))
    else:
        checks.append((False, f"{case_name}: no calibration, efficiency target unchecked"))
    diff = abs(a["rel_inertia_diff"])
    checks.append((diff <= MAX_REL_INERTIA_DIFF,
                   f"{case_name}: |inertia accel - sklearn| / sklearn = {diff:.2e}"
                   f" <= {MAX_REL_INERTIA_DIFF:.0e}"))
    return checks


# ---------------------------------------------------------------- main


def cpu_name():
    # platform.processor() is empty on most Linux systems.
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    # A string, not a Path, so that "./accel" keeps its "./" and is not looked
    # up on PATH by subprocess.
    p.add_argument("--accel", default=str(REPO / "build" / "bin" / "accel"),
                   help="accel binary (default: %(default)s)")
    p.add_argument("--threads", type=int, default=2,
                   help="threads for every method (default: %(default)s)")
    p.add_argument("--cases", default="fmnist,blobs",
                   help="comma-separated subset of: " + ",".join(TARGETS))
    p.add_argument("--blobs-n", type=int, default=None,
                   help="points in the blobs case (default: 10000000, 1000000 with --quick)")
    p.add_argument("--quick", action="store_true",
                   help="smoke-test sizes: fmnist first 10000 rows, blobs 1000000 points")
    p.add_argument("--json-out", type=Path, help="also write all results to this file")
    p.add_argument("--grid", action="store_true",
                   help="the roofline grid (kmeans_grid.py) instead of the two cases")
    p.add_argument("--grid-d", help="comma list of d (default: 2,3,4,8,16,32,64,128,256,784)")
    p.add_argument("--grid-k", help="comma list of K (default: 4,8,16,64,256,1024)")
    p.add_argument("--grid-n", type=int, default=1_000_000, help="rows a shape (default: %(default)s)")
    p.add_argument("--grid-n-large", type=int, default=200_000, help="rows where d >= 256 (default: %(default)s)")
    p.add_argument("--grid-iters", type=int, default=5, help="Lloyd iterations a shape (default: %(default)s)")
    p.add_argument("--grid-cheap-ms", type=float, default=20.0,
                   help="shapes whose limit is below this many ms are timed by two fits' difference "
                        "(default: %(default)s)")
    p.add_argument("--grid-pruned", action="store_true", help="also time accel --algorithm yinyang")
    p.add_argument("--grid-no-peers", action="store_true", help="accel only")
    p.add_argument("--grid-png", type=Path, help="draw the heat map of accel's fraction of the limit here")
    p.add_argument("--data-dir", type=Path, default=REPO / "build" / "bench-data",
                   help="cache for the generated .npy inputs (default: %(default)s)")
    args = p.parse_args()
    args.cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = set(args.cases) - set(TARGETS)
    if unknown:
        p.error(f"unknown case(s): {', '.join(sorted(unknown))}")
    if args.blobs_n is None:
        args.blobs_n = 1_000_000 if args.quick else 10_000_000
    return args


def main():
    args = parse_args()
    sizes = {"fmnist": 10_000 if args.quick else 60_000, "blobs": args.blobs_n}
    params = {"fmnist": (256, 20), "blobs": (4, 100)}
    cases = [Case(c, *params[c], n=sizes[c]) for c in args.cases]
    args.data_dir.mkdir(parents=True, exist_ok=True)

    faiss.omp_set_num_threads(args.threads)
    print(f"k-means benchmark: {cpu_name()},"
          f" {args.threads} threads, numpy {np.__version__}, scikit-learn"
          f" {sklearn.__version__}, faiss {faiss.__version__}")

    # On a 2-core machine a concurrent build halves every number below, and
    # nothing in the results themselves would show it.
    load = os.getloadavg()[0]
    if load > 0.5:
        print(f"WARNING: 1-minute load average is {load:.2f} before starting;"
              f" timings are unreliable while other work runs", file=sys.stderr)

    accel_failed = False
    try:
        calib = calibrate(args.accel, args.threads)
        print(f"calibration: sgemm {calib['sgemm_gflops']:.1f} GFLOP/s,"
              f" read {calib['read_gbps']:.2f} GB/s")
    except (AccelError, OSError) as e:
        print(f"ERROR: accel calibrate failed: {e}", file=sys.stderr)
        accel_failed, calib = True, None

    if args.grid:
        if calib is None:
            return 1
        from kmeans_grid import run_grid
        grid = run_grid(args, calib, lambda: calibrate(args.accel, args.threads))
        if args.json_out:
            args.json_out.write_text(json.dumps({"cpu": cpu_name(), "threads": args.threads, "calibration": calib,
                                                 "grid": grid}, indent=2) + "\n")
        return 0

    report = {"cpu": cpu_name(), "threads": args.threads, "loadavg_at_start": load, "quick": args.quick, "calibration": calib,
              "versions": {"numpy": np.__version__, "sklearn": sklearn.__version__,
                           "faiss": faiss.__version__},
              "cases": {}}
    all_checks = []
    for case in cases:
        print(f"\n== {case.name}: n={case.n}, K={case.k}, {case.max_iter} iterations")
        x, c0, x_path, c0_path = prepare(case, args.data_dir)
        rows = {}
        with threadpool_limits(limits=args.threads):
            rows["sklearn"] = run_sklearn(x, c0, case)
            rows["intelex"] = run_sklearnex(x, c0, case)
            rows["faiss"] = run_faiss(x, c0, case)
        try:
            rows["accel"] = run_accel(args.accel, x_path, c0_path, case, args.threads)
        except (AccelError, OSError) as e:
            print(f"ERROR: accel kmeans failed: {e}", file=sys.stderr)
            accel_failed = True
        rows["accel-py"] = run_accel_python(x, c0, case)
        add_derived(rows, *x.shape, case.k, calib)
        print_table(rows)
        checks = check_targets(case.name, rows)
        all_checks += checks
        report["cases"][case.name] = {
            "n": case.n, "d": x.shape[1], "k": case.k, "max_iter": case.max_iter,
            "results": rows,
            "targets": [{"passed": ok, "check": text} for ok, text in checks]}

    print("\ntargets:")
    for ok, text in all_checks:
        print(f"  {'PASS' if ok else 'FAIL'} {text}")

    if args.json_out:
        args.json_out.write_text(json.dumps(report, indent=2) + "\n")
    return 1 if accel_failed else 0


if __name__ == "__main__":
    sys.exit(main())
