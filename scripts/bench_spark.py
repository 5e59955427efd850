#!/usr/bin/env python3
"""End-to-end k-means: Spark MLlib vs accel (single node and distributed).

Every method starts from the same initial centroids and runs a fixed number of
Lloyd iterations (tolerance 0), side by side in one run:

  spark         Spark MLlib (RDD API) org.apache.spark.mllib.clustering.KMeans,
                master local[2], initialModel = the shared initial centroids,
                epsilon 0. The data is loaded into the JVM and cached
                (materialised by a count) before the clock starts; only
                KMeans.run() is timed. See "Spark, which API" below.
  spark-py      (optional, --spark-api python|both) pyspark.mllib KMeans.train
                on a cached Python RDD. Its time includes pickling every row
                from the Python workers into the JVM, which happens inside
                train() on every call and is no part of k-means.
  accel         build/bin/accel kmeans --device cpu (one process).
  accel-dist    scripts/cluster.sh --workers (default 1) on loopback: the
                coordinator and the workers each compute a partition, and
                share the cores (cluster.sh gives each participant its own).
                seconds.job from the coordinator's JSON is the headline: the
                capability probes, the data distribution and every iteration;
                everything but reading the input file and waiting for the
                worker processes to start, which neither Spark's time (data
                load and executor start-up untimed) nor accel's
                single-process time includes either. The script's wall time
                (process start-up, input reading) is shown too.

The printed ratio is Spark's time / the method's time; the target is accel at
least 50x faster than Spark, judged for accel and accel-dist separately.
Each accel method runs --repeat times (default 3) before Spark and as many
times after it, and its row is the median run (every run's time is printed
beside it): a 2-3 s run on a shared machine moved by 20% between consecutive
runs, and in slow spells of the host lasting minutes accel's runs took 1.5-2x
their usual time while Spark's moved far less; Spark's 50-100 s run averages
such spells by itself. The reruns at Spark's own iteration count (below) all
come after it, 2 x --repeat of them.

Spark, which API: pyspark.ml.clustering.KMeans (DataFrame) takes no initial
model, and pyspark.mllib KMeans.train() re-sends the whole RDD from Python to
the JVM on every call (PythonMLLibAPI unpickles it and persists it inside the
call), so timing train() would charge Spark for Python serialisation. The
default therefore converts the rows to a JVM RDD[Vector] once, caches it, and
drives the very Scala KMeans that train() ends up in through py4j. The data
enters Spark as float64 copies of the float32 inputs (exact).

Spark's convergence test with epsilon 0 stops when no centre moves at all (it
has no "always run maxIter" switch, and epsilon must be >= 0), so on easy data
it can stop before max-iter; accel with --tol 0 always runs max-iter. When
Spark stops early, accel and accel-dist run again with Spark's iteration count
(rows "accel@N"), and the verdict compares those: the same work, total time.
The table also gives seconds per iteration and the ratio of those.

Costs: every method's own reported cost, and "f64 cost", the sum of squared
distances to the nearest final centroid computed here in float64 from each
method's final centroids, as a common yardstick.

Data: the same cache as scripts/bench_kmeans.py (<data-dir>/<case>-n<N>.npy
and <case>-n<N>-init-k<K>.npy); missing files are generated the same way:
blobs = 4 unit-variance Gaussians around centres uniform in [-10,10]^2
(numpy default_rng(42): centres, then labels, then float32 normal noise);
fmnist = the first N Fashion-MNIST training images, uint8/255 as float32;
gauss8 = 500,000 rows in 8-D around 8 unit Gaussians (K = 8, 50 iterations);
init = K rows of X with pairwise distinct values, in the order of
default_rng(0).permutation(N).

Run with the benchmark venv (pyspark installed into it):
    .bench-venv/bin/python scripts/bench_spark.py --quick

Exit status: 0 when all methods ran (targets met or not), 1 when one failed,
2 when accel is not built or the input is missing.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(os.environ.get("ACCEL_REPO") or Path(__file__).resolve().parent.parent)
TARGET_SPEEDUP = 50.0


@dataclass
class Case:
    name: str
    n: int
    k: int
    iters: int
    d: int = 0


class MethodError(RuntimeError):
    pass


# ------------------------------------------------------------------ data


# The data sets and initial centroids are bench_kmeans.py's, so both
# benchmarks run (and cache) exactly the same inputs.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_kmeans import load_fmnist, make_blobs, pick_init  # noqa: E402


def cached(path, make):
    if not path.exists():
        print(f"  generating {path}", flush=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "wb") as f:
            np.save(f, np.ascontiguousarray(make(), dtype=np.float32))
        os.replace(tmp, path)  # never leave a truncated cache file behind
    a = np.load(path)
    if a.dtype != np.float32 or a.ndim != 2:
        raise ValueError(f"{path}: expected a 2-D float32 array, got {a.dtype} {a.shape}")
    return a


def make_gauss8(n):
    """n points in 8-D around 8 unit-variance Gaussian centers uniform in
    [-5, 5]^8 (default_rng(8)): the shape a new user tries first (issue 18)."""
    rng = np.random.default_rng(8)
    centers = rng.uniform(-5, 5, size=(8, 8)).astype(np.float32)
    return centers[rng.integers(0, 8, size=n)] + rng.standard_normal((n, 8), dtype=np.float32)


def prepare(case, data_dir):
    stem = f"{case.name}-n{case.n}"
    x_path = data_dir / f"{stem}.npy"
    c0_path = data_dir / f"{stem}-init-k{case.k}.npy"
    make = {"blobs": lambda: make_blobs(case.n), "fmnist": lambda: load_fmnist(case.n),
            "gauss8": lambda: make_gauss8(case.n)}
    x = cached(x_path, make[case.name])
    c0 = cached(c0_path, lambda: pick_init(x, case.k))
    if x.shape[0] != case.n or c0.shape != (case.k, x.shape[1]):
        raise ValueError(f"cached {x_path} / {c0_path} have shapes {x.shape} / {c0.shape}")
    return x, c0, x_path, c0_path


def f64_cost(x, centroids):
    """Sum over rows of the squared distance to the nearest centroid, float64."""
    c = np.asarray(centroids, dtype=np.float64)
    c_sq = (c * c).sum(axis=1)
    step = max(1, (1 << 22) // x.shape[1])
    total = 0.0
    for s in range(0, len(x), step):
        b = x[s:s + step].astype(np.float64)
        d = (b * b).sum(axis=1) + (c_sq - 2.0 * (b @ c.T)).min(axis=1)
        total += float(np.maximum(d, 0.0).sum())
    return total


# ------------------------------------------------------------------ accel


def run_proc(cmd, timeout, env=None):
    """Run cmd in its own process group; on timeout kill the whole group."""
    start = time.perf_counter()
    proc = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=5)
                break
            except subprocess.TimeoutExpired:
                pass
        proc.communicate()
        raise MethodError(f"{cmd[0]} timed out after {timeout} s") from None
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise MethodError(f"{' '.join(map(str, cmd))} exited with {proc.returncode}:\n"
                          f"{err.strip()[-2000:]}")
    return out, err, wall


def last_json_line(out, what):
    for line in reversed(out.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                break
    raise MethodError(f"{what}: no JSON summary on stdout:\n{out[-2000:]}")


def accel_row(obj, wall, x, cent_path, what):
    try:
        secs = obj["seconds"]
        row = {"seconds": float(secs["job"] if "job" in secs else secs["total"]),
               "iterations": int(obj["iterations"]),
               "cost": float(obj["inertia"]),
               "wall": wall,
               "detail": obj["seconds"]}
    except (KeyError, TypeError, ValueError) as e:
        raise MethodError(f"{what}: JSON summary lacks or mistypes {e}: {obj}") from None
    if cent_path.exists():
        row["f64_cost"] = f64_cost(x, np.load(cent_path))
    return row


def kmeans_args(x_path, c0_path, case):
    return ["--input", x_path, "--k", case.k, "--max-iter", case.iters, "--tol", 0,
            "--init", c0_path, "--device", "cpu", "--json"]


def run_accel(args, x, x_path, c0_path, case, tmp):
    cent = tmp / f"accel-{case.name}-centroids.npy"
    out, _, wall = run_proc([args.accel, "kmeans", *kmeans_args(x_path, c0_path, case),
                             "--output-centroids", cent], args.timeout)
    return accel_row(last_json_line(out, "accel kmeans"), wall, x, cent, "accel kmeans")


def run_accel_dist(args, x, x_path, c0_path, case, tmp):
    cent = tmp / f"accel-dist-{case.name}-centroids.npy"
    env = dict(os.environ, ACCEL_CLUSTER_DIR=str(args.cluster_dir), ACCEL_BIN=str(args.accel))
    out, _, wall = run_proc(["bash", args.cluster_script, args.workers, "--",
                             *kmeans_args(x_path, c0_path, case), "--output-centroids", cent],
                            args.timeout, env=env)
    row = accel_row(last_json_line(out, "cluster.sh"), wall, x, cent, "cluster.sh")
    return row


# ------------------------------------------------------------------ Spark


class Spark:
    def __init__(self, args):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        from pyspark.sql import SparkSession
        self.args = args
        t = time.perf_counter()
        self.session = (
            SparkSession.builder.master(f"local[{args.spark_cores}]")
            .appName("accel-bench-spark")
            .config("spark.driver.memory", args.spark_memory)
            .config("spark.driver.maxResultSize", "2g")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.local.dir", str(args.tmp))
            .getOrCreate())
        self.sc = self.session.sparkContext
        self.sc.setLogLevel("WARN")
        self.jvm = self.sc._jvm
        self.startup = time.perf_counter() - t
        self.version = self.sc.version

    def stop(self):
        """Stops Spark and ends its JVM. session.stop() alone leaves the JVM
        process (8 GB heap, its GC and compiler threads) alive until Python
        exits, and accel's runs "after Spark" then shared the 2 cores with
        it: 1.56-1.71 s against 1.40-1.54 s before Spark in one run."""
        from pyspark import SparkContext
        self.session.stop()
        gateway = SparkContext._gateway
        proc = getattr(gateway, "proc", None)
        if gateway is not None:
            gateway.shutdown()
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        SparkContext._gateway = None
        SparkContext._jvm = None

    def python_rdd(self, x):
        """Cached Python RDD of mllib DenseVectors (float64 copies of x's rows)."""
        from pyspark.mllib.linalg import DenseVector
        parts = self.args.spark_partitions
        chunks = np.array_split(x, max(parts * 4, 1))  # several pickles per partition

        def to_vectors(it):
            for block in it:
                for row in block.astype(np.float64):
                    yield DenseVector(row)

        return self.sc.parallelize(chunks, parts).mapPartitions(to_vectors)

    def jvm_rdd(self, x):
        """Cached, materialised JVM RDD[Vector] of x; returns (rdd, seconds)."""
        from pyspark.mllib.common import _to_java_object_rdd
        t = time.perf_counter()
        jrdd = _to_java_object_rdd(self.python_rdd(x)).rdd()
        jrdd.persist(self.jvm.org.apache.spark.storage.StorageLevel.MEMORY_ONLY())
        jrdd.localCheckpoint()
        self.materialise(jrdd, len(x))
        return jrdd, time.perf_counter() - t

    def materialise(self, rdd, n):
        """Count rdd once, which fills its cache and, because rdd is marked
        for localCheckpoint(), cuts its lineage. Without the cut every task of
        every iteration would carry its slice of the parallelize()d numpy data
        (ParallelCollectionPartition holds the rows even when the cache
        serves them), which a file-backed Spark job would not pay for."""
        self.sc.setLogLevel("ERROR")  # the one-off "task of very large size"
        try:
            count = rdd.count()
        finally:
            self.sc.setLogLevel("WARN")
        if count != n:
            raise MethodError(f"Spark RDD has {count} rows, expected {n}")

    def initial_model(self, c0):
        from pyspark.mllib.common import _py2java
        from pyspark.mllib.linalg import DenseVector
        centers = [_py2java(self.sc, DenseVector(c.astype(np.float64))) for c in c0]
        return self.jvm.org.apache.spark.mllib.clustering.KMeansModel(centers)

    def centers(self, jmodel):
        from pyspark.mllib.common import _java2py
        return np.array([v.toArray() for v in _java2py(self.sc, jmodel.clusterCenters())])

    def timed(self, fn):
        """fn() under an alarm of --spark-timeout seconds; returns (result, s)."""
        def on_alarm(signum, frame):
            self.sc.cancelAllJobs()
            raise MethodError(f"Spark timed out after {self.args.spark_timeout} s")
        old = signal.signal(signal.SIGALRM, on_alarm)
        signal.alarm(self.args.spark_timeout)
        try:
            t = time.perf_counter()
            res = fn()
            return res, time.perf_counter() - t
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)

    def run_jvm(self, x, c0, case):
        jrdd, load_s = self.jvm_rdd(x)
        try:
            km = (self.jvm.org.apache.spark.mllib.clustering.KMeans()
                  .setK(case.k).setMaxIterations(case.iters).setEpsilon(0.0).setSeed(1)
                  .setInitialModel(self.initial_model(c0)))
            jmodel, seconds = self.timed(lambda: km.run(jrdd))
            iters = int(jmodel.numIter())
            centers = self.centers(jmodel)
            cost = float(jmodel.computeCost(jrdd))
        finally:
            jrdd.unpersist(True)
        return {"seconds": seconds, "iterations": iters, "cost": cost,
                "f64_cost": f64_cost(x, centers), "load": load_s}

    def run_python(self, x, c0, case):
        from pyspark.mllib.clustering import KMeans, KMeansModel
        t = time.perf_counter()
        rdd = self.python_rdd(x).cache()
        rdd.localCheckpoint()
        self.materialise(rdd, len(x))
        load_s = time.perf_counter() - t
        try:
            model, seconds = self.timed(lambda: KMeans.train(
                rdd, case.k, maxIterations=case.iters, initializationMode="k-means||",
                seed=1, epsilon=0.0,
                initialModel=KMeansModel([c.astype(np.float64) for c in c0])))
            cost = float(model.computeCost(rdd))
            centers = np.array(model.clusterCenters)
        finally:
            rdd.unpersist(True)
        # pyspark's KMeansModel drops the iteration count (the JVM model has it).
        return {"seconds": seconds, "iterations": None, "cost": cost,
                "f64_cost": f64_cost(x, centers), "load": load_s}


# ------------------------------------------------------------------ report


def fmt(v, spec, none="-"):
    return none if v is None else format(v, spec)


def print_table(case, rows):
    spark = rows.get("spark") or rows.get("spark-py")
    ref_cost = (rows.get("accel") or {}).get("f64_cost")
    print(f"\n{case.name}: n={case.n} d={case.d} k={case.k} max-iter={case.iters}")
    hdr = (f"  {'method':<11}{'seconds':>10}{'wall s':>9}{'iters':>6}{'s/iter':>9}"
           f"{'own cost':>17}{'f64 cost':>17}{'rel.diff':>10}{'Spark/x':>9}{'per-iter':>9}"
           f"{'wall':>8}")
    print(hdr)
    for name, r in rows.items():
        if "error" in r:
            lines = r["error"].splitlines()
            why = next((l for l in lines if "error" in l.lower()), lines[-1] if lines else "")
            print(f"  {name:<11}FAILED: {why.strip()}")
            continue
        per_iter = r["seconds"] / r["iterations"] if r.get("iterations") else None
        ratio = ratio_it = ratio_wall = None
        if spark and "error" not in spark and name not in ("spark", "spark-py"):
            ratio = spark["seconds"] / r["seconds"]
            ratio_wall = spark["seconds"] / r["wall"]
            if spark.get("iterations") and per_iter:
                ratio_it = spark["seconds"] / spark["iterations"] / per_iter
        rel = None
        if ref_cost and r.get("f64_cost") is not None:
            rel = r["f64_cost"] / ref_cost - 1.0
        print(f"  {name:<11}{r['seconds']:>10.3f}{fmt(r.get('wall'), '9.2f', '        -')}"
              f"{fmt(r.get('iterations'), '6d', '     ?')}{fmt(per_iter, '9.4f', '        -')}"
              f"{r['cost']:>17.6e}{fmt(r.get('f64_cost'), '17.6e', '                -')}"
              f"{fmt(rel, '10.1e', '         -')}"
              f"{fmt(ratio, '8.1f', '       -')}x{fmt(ratio_it, '8.1f', '       -')}x"
              f"{fmt(ratio_wall, '7.1f', '      -')}x")
    extra = []
    for name in ("spark", "spark-py"):
        r = rows.get(name)
        if r and "load" in r:
            extra.append(f"{name} data load+cache (untimed) {r['load']:.1f} s")
    for name, r in rows.items():
        if len(r.get("runs", [])) > 1:
            extra.append(f"{name} runs (s, in order): " + ", ".join(f"{v:.3f}" for v in r["runs"]) + " (median shown)")
    if "accel-dist" in rows and "detail" in rows["accel-dist"]:
        extra.append("accel-dist seconds: " + json.dumps(rows["accel-dist"]["detail"]))
    for e in extra:
        print("  " + e)


def verdicts(case, rows):
    spark = rows.get("spark") or rows.get("spark-py")
    out = []
    for base in ("accel", "accel-dist"):
        # The run with Spark's own iteration count, when Spark stopped early.
        name = next((m for m in rows if m.startswith(base + "@")), base)
        r = rows.get(name)
        if not r or not spark or "error" in r or "error" in spark:
            continue
        ratio = spark["seconds"] / r["seconds"]
        ok = ratio >= TARGET_SPEEDUP
        out.append(ok)
        print(f"  {'PASS' if ok else 'FAIL'}  {case.name}: {name} {ratio:.1f}x faster than Spark "
              f"(target >= {TARGET_SPEEDUP:g}x, Spark {spark['seconds']:.2f} s / "
              f"{name} {r['seconds']:.3f} s)")
    return out


# ------------------------------------------------------------------ main


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="smoke-test sizes: blobs 1,000,000 points, fmnist 10,000 rows")
    p.add_argument("--cases", default="blobs,fmnist,gauss8")
    p.add_argument("--methods", default="accel,accel-dist,spark",
                   help="comma list of accel, accel-dist, spark (default: %(default)s)")
    p.add_argument("--spark-api", choices=["jvm", "python", "both"], default="jvm",
                   help="jvm: time Scala KMeans.run on a cached JVM RDD (default); python: "
                        "time pyspark.mllib KMeans.train (includes Python->JVM transfer)")
    p.add_argument("--data-dir", type=Path, default=REPO / "build" / "bench-data")
    p.add_argument("--accel", type=Path, default=REPO / "build" / "bin" / "accel")
    p.add_argument("--cluster-script", type=Path, default=REPO / "scripts" / "cluster.sh")
    p.add_argument("--workers", type=int, default=1,
                   help="workers besides the coordinator, which computes a partition too; "
                        "the default gives 2 participants for 2 cores")
    p.add_argument("--cluster-dir", type=Path,
                   default=Path(os.environ.get("ACCEL_CLUSTER_DIR") or
                                Path(tempfile.gettempdir()) / "accel-bench-spark-cluster"))
    p.add_argument("--spark-cores", type=int, default=2)
    p.add_argument("--spark-memory", default="8g")
    p.add_argument("--spark-partitions", type=int, default=4)
    p.add_argument("--repeat", type=int, default=3, help="runs of each accel method; the median is reported")
    p.add_argument("--timeout", type=int, default=1800, help="per accel run, seconds")
    p.add_argument("--spark-timeout", type=int, default=3600, help="per Spark fit, seconds")
    p.add_argument("--json-out", type=Path, help="also write all results here")
    return p.parse_args()


def main():
    args = parse_args()
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    bad = set(methods) - {"accel", "accel-dist", "spark"}
    if bad:
        sys.exit(f"unknown methods {sorted(bad)}")
    if {"accel", "accel-dist"} & set(methods) and not os.access(args.accel, os.X_OK):
        print(f"error: {args.accel} is not built (run scripts/build.sh)", file=sys.stderr)
        return 2
    if "accel-dist" in methods and not args.cluster_script.exists():
        print(f"error: {args.cluster_script} missing", file=sys.stderr)
        return 2
    if args.repeat < 1:
        print(f"error: --repeat {args.repeat}: must be at least 1", file=sys.stderr)
        return 2
    sizes = {"blobs": 1_000_000 if args.quick else 10_000_000,
             "fmnist": 10_000 if args.quick else 60_000,
             "gauss8": 100_000 if args.quick else 500_000}
    params = {"blobs": (4, 100), "fmnist": (256, 20), "gauss8": (8, 50)}
    cases = []
    for name in [c.strip() for c in args.cases.split(",") if c.strip()]:
        if name not in sizes:
            sys.exit(f"unknown case {name!r} (blobs, fmnist, gauss8)")
        cases.append(Case(name, sizes[name], *params[name]))

    args.tmp = Path(tempfile.mkdtemp(prefix="bench-spark-"))
    print(f"accel {args.accel}; data {args.data_dir}; {os.cpu_count()} CPUs", flush=True)
    data = {}
    try:
        for case in cases:
            try:
                data[case.name] = prepare(case, args.data_dir)
            except (OSError, ValueError) as e:
                print(f"error: {case.name} input: {e}", file=sys.stderr)
                return 2
            case.d = data[case.name][0].shape[1]
        results = {c.name: {} for c in cases}

        all_runs = {}  # (case, key) -> every run so far

        def run_accels(case, suffix="", what="", repeat=args.repeat):
            x, c0, x_path, c0_path = data[case.name]
            for name, fn in (("accel", run_accel), ("accel-dist", run_accel_dist)):
                if name not in methods:
                    continue
                key = name + suffix
                print(f"[{case.name}] {key}{what} ...", flush=True)
                try:
                    runs = all_runs.setdefault((case.name, key), [])
                    runs += [fn(args, x, x_path, c0_path, case, args.tmp) for _ in range(repeat)]
                    ranked = sorted(runs, key=lambda r: r["seconds"])
                    row = dict(ranked[(len(ranked) - 1) // 2])  # the median (the lower one of an even count)
                    row["runs"] = [r["seconds"] for r in runs]  # in the order they ran
                    results[case.name][key] = row
                except MethodError as e:
                    results[case.name][key] = {"error": str(e)}
                    print(f"  {key} failed: {e}", file=sys.stderr)

        # accel first, so that the idle Spark JVM is not even running yet.
        for case in cases:
            run_accels(case)

        if "spark" in methods:
            print("starting Spark ...", flush=True)
            spark = Spark(args)
            print(f"  Spark {spark.version}, local[{args.spark_cores}], "
                  f"driver memory {args.spark_memory}, start-up {spark.startup:.1f} s", flush=True)
            try:
                apis = {"jvm": ["spark"], "python": ["spark-py"],
                        "both": ["spark", "spark-py"]}[args.spark_api]
                for case in cases:
                    x, c0, _, _ = data[case.name]
                    for name in apis:
                        print(f"[{case.name}] {name} ...", flush=True)
                        fn = spark.run_jvm if name == "spark" else spark.run_python
                        try:
                            results[case.name][name] = fn(x, c0, case)
                        except Exception as e:  # py4j errors, timeouts
                            results[case.name][name] = {"error": f"{type(e).__name__}: {e}"}
                            print(f"  {name} failed: {e}", file=sys.stderr)
            finally:
                spark.stop()

        # The same runs again once the JVM is gone: a row is the median of runs
        # taken before and after Spark's, so a slow spell of the shared host
        # (minutes long here) weighs on both sides.
        if "spark" in methods:
            for case in cases:
                run_accels(case, what=" (after Spark)")

        # Spark stops by itself when no centre moves (see above). Where it did,
        # accel runs again for exactly Spark's iteration count, after the JVM
        # is gone, so the headline compares the same work in total time.
        for case in cases:
            sp = results[case.name].get("spark") or results[case.name].get("spark-py")
            if not sp or "error" in sp or not sp.get("iterations") or sp["iterations"] >= case.iters:
                continue
            same = Case(case.name, case.n, case.k, sp["iterations"], case.d)
            run_accels(same, f"@{same.iters}", " (Spark's iteration count)", 2 * args.repeat)
    finally:
        shutil.rmtree(args.tmp, ignore_errors=True)

    # Spark first in each table: it is the reference of the ratios.
    order = ["spark", "spark-py", "accel", "accel-dist"]
    passes = []
    for case in cases:
        rows = {m: results[case.name][m] for m in order if m in results[case.name]}
        rows.update({m: r for m, r in results[case.name].items() if "@" in m})
        print_table(case, rows)
        passes += verdicts(case, rows)
    if passes:
        print(f"\n{sum(passes)}/{len(passes)} targets met (accel >= {TARGET_SPEEDUP:g}x Spark)")
    if args.json_out:
        args.json_out.write_text(json.dumps(results, indent=2, default=str))
    failed = any("error" in r for res in results.values() for r in res.values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
