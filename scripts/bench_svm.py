#!/usr/bin/env python3
"""Side-by-side SVM training benchmark: accel svm-train and accel.sklearn's
SVC (the Python estimator) against scikit-learn-intelex (oneDAL) SVC, LIBSVM
svm-train and scikit-learn SVC.

Cases:
  fmnist-N  [Narasimhan14]'s MNIST setup (Narasimhan et al. 2014 Table 2) on Fashion-MNIST:
            even classes (-1) against odd (+1), pixels scaled to [0, 1], RBF,
            C = 10, gamma = 0.02, eps = 1e-3, trained on the first N training
            images, tested on the 10,000 test images;
  sparse    a generated text-like set: 20,000 training and 5,000 test rows,
            50,000 features, ~0.3% non-zeros (150 a row) (tf-idf-like weights, rows of
            unit length), two classes told apart by a few hundred words;
            RBF, C = 10, gamma = 0.5.
Every method gets the same C, gamma, eps and kernel cache (-m). Each
Python peer runs in a child process, so its peak memory is its own;
scikit-learn-intelex runs on float64 data (what a scikit-learn user holds)
and on float32 (accel's kernel values are float32).

Printed per case: accuracy, fit seconds, the dual objective, the support
vectors (and how many differ from LIBSVM's), peak memory, and ratios. The
"fit" of accel is its solver time (svm-train --json seconds.total, no file
parsing), comparable with the Python peers' fit(); "wall" is the whole
process, comparable with svm-train's. Each timing is the median of
--repeat runs (these machines are shared).

    .bench-venv/bin/python scripts/bench_svm.py --cases fmnist-10000 sparse
    .bench-venv/bin/python scripts/bench_svm.py --cases fmnist-60000 --skip-libsvm

Data files (LIBSVM text) are cached under --data-dir. ACCEL_REPO overrides
the repository root the defaults derive from. Exit status: 0 when every
method ran, 1 when accel failed.
"""

import argparse
import gzip
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(os.environ.get("ACCEL_REPO", Path(__file__).resolve().parent.parent))
FASHION = Path("/usr/share/datasets/fashion-mnist")
PARAMS = {"fmnist": {"C": 10.0, "gamma": 0.02}, "sparse": {"C": 10.0, "gamma": 0.5}}


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def write_libsvm(path, rows, y):
    """rows: a dense 2-D array, or a list of (indices, values) pairs."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w") as f:
        for r, yi in zip(rows, y):
            idx, val = (np.nonzero(r)[0], r[np.nonzero(r)[0]]) if isinstance(r, np.ndarray) else r
            f.write("%d %s\n" % (yi, " ".join("%d:%.6g" % (j + 1, v) for j, v in zip(idx, val))))
    tmp.rename(path)


def prepare_fmnist(data_dir, rows):
    train, test = data_dir / f"fashion_parity_{rows}.train", data_dir / "fashion_parity.test"
    if not train.exists() or not test.exists():
        xtr = read_idx(FASHION / "train-images-idx3-ubyte.gz").reshape(-1, 784) / 255.0
        ytr = np.where(read_idx(FASHION / "train-labels-idx1-ubyte.gz") % 2 == 1, 1, -1)
        xte = read_idx(FASHION / "t10k-images-idx3-ubyte.gz").reshape(-1, 784) / 255.0
        yte = np.where(read_idx(FASHION / "t10k-labels-idx1-ubyte.gz") % 2 == 1, 1, -1)
        if not train.exists():
            write_libsvm(train, xtr[:rows], ytr[:rows])
        if not test.exists():
            write_libsvm(test, xte, yte)
    return train, test, 784


def sparse_rows(rng, n, d, nnz, topic_words, y):
    """Text-like rows: Zipf-distributed words, a class's topic words drawn
    more often in its rows, tf-idf-like weights, unit length."""
    ranks = np.arange(1, d + 1, dtype=np.float64)
    cdf = np.cumsum(1.0 / ranks ** 1.1)
    cdf /= cdf[-1]
    idf = np.log(1.0 + d / (1.0 + ranks))
    rows = []
    for yi in y:
        k = max(5, int(rng.poisson(nnz)))
        words = np.minimum(np.searchsorted(cdf, rng.random(k)), d - 1)
        topic = rng.choice(topic_words[0 if yi > 0 else 1], size=max(1, k // 30))
        words = np.unique(np.concatenate([words, topic]))
        tf = 1.0 + np.log(rng.integers(1, 4, size=words.size))
        w = tf * idf[words]
        rows.append((words, w / np.linalg.norm(w)))
    return rows


def prepare_sparse(data_dir, n_train=20000, n_test=5000, d=50000, nnz=240):
    train, test = data_dir / "sparse_text.train", data_dir / "sparse_text.test"
    if not train.exists() or not test.exists():
        rng = np.random.default_rng(2026)
        perm = rng.permutation(np.arange(500, 5000))  # mid-frequency words carry the topics
        topics = (perm[:300], perm[300:600])
        y = np.where(rng.random(n_train + n_test) < 0.5, 1, -1)
        rows = sparse_rows(rng, n_train + n_test, d, nnz, topics, y)
        write_libsvm(train, rows[:n_train], y[:n_train])
        write_libsvm(test, rows[n_train:], y[n_train:])
    return train, test, d


def accuracy_of(predict_stdout):
    m = re.search(r"Accuracy = ([0-9.]+)%", predict_stdout)
    return float(m.group(1)) if m else float("nan")


def timed(cmd):
    """Runs cmd under /usr/bin/time -v: (seconds, stdout, peak MB)."""
    t0 = time.perf_counter()
    r = subprocess.run(["/usr/bin/time", "-v", *map(str, cmd)], capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} exited {r.returncode}: {r.stderr.strip()[-400:]}")
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr)
    return dt, r.stdout, (int(m.group(1)) / 1024.0 if m else float("nan"))


def sv_lines(model_path):
    """Support vectors of a LIBSVM model file as a multiset of their feature text."""
    out, body = [], False
    with open(model_path) as f:
        for line in f:
            if body:
                parts = line.split()
                out.append(" ".join(p for p in parts if ":" in p))
            elif line.strip() == "SV":
                body = True
    return sorted(out)


def sv_difference(a, b):
    """Size of the symmetric difference of two sorted multisets."""
    i = j = diff = 0
    while i < len(a) or j < len(b):
        if j == len(b) or (i < len(a) and a[i] < b[j]):
            diff, i = diff + 1, i + 1
        elif i == len(a) or b[j] < a[i]:
            diff, j = diff + 1, j + 1
        else:
            i, j = i + 1, j + 1
    return diff


def python_worker(args):
    """Child process: fit one Python peer, print one JSON line."""
    from sklearn.datasets import load_svmlight_file

    xtr, ytr = load_svmlight_file(args.worker_train, n_features=args.worker_features)
    xte, yte = load_svmlight_file(args.worker_test, n_features=args.worker_features)
    dtype = np.float32 if args.worker_dtype == "float32" else np.float64
    if not args.worker_sparse:
        # Dense, as scikit-learn users hold images.
        xtr, xte = xtr.toarray(), xte.toarray()
    else:
        xtr.indices, xte.indices = xtr.indices.astype(np.int32), xte.indices.astype(np.int32)
        xtr.indptr, xte.indptr = xtr.indptr.astype(np.int32), xte.indptr.astype(np.int32)
    xtr, xte = xtr.astype(dtype), xte.astype(dtype)
    if args.worker == "sklearnex":
        from sklearnex.svm import SVC
    elif args.worker == "accel":
        from accel import _accel
        from accel.sklearn import SVC

        _accel.devices()  # device discovery (once a process) outside the fit, as svm-train's seconds leave it out
    else:
        from sklearn.svm import SVC
    clf = SVC(C=args.worker_C, gamma=args.worker_gamma, tol=args.worker_eps, cache_size=args.worker_cache)
    t0 = time.perf_counter()
    clf.fit(xtr, ytr)
    fit = time.perf_counter() - t0
    acc = 100.0 * float(np.mean(clf.predict(xte) == yte))
    # Dual objective 1/2 c'Kc - sum|c| from the support vectors, c = y * alpha.
    from sklearn.metrics.pairwise import rbf_kernel

    sv = xtr[clf.support_].astype(np.float64)
    dual = clf.dual_coef_
    c = np.asarray(dual.todense() if hasattr(dual, "todense") else dual, dtype=np.float64).ravel()
    obj = 0.0
    for s in range(0, sv.shape[0], 2048):
        obj += 0.5 * float(c[s : s + 2048] @ (rbf_kernel(sv[s : s + 2048], sv, gamma=args.worker_gamma) @ c))
    obj -= float(np.abs(c).sum())
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps({"fit": fit, "accuracy": acc, "obj": obj, "nSV": int(clf.support_.size), "peak_mb": peak}))


def run_python(kind, dtype, train, test, features, sparse, prm, args):
    cmd = [sys.executable, __file__, "--worker", kind, "--worker-dtype", dtype, "--worker-train", str(train),
           "--worker-test", str(test), "--worker-features", str(features), "--worker-C", str(prm["C"]),
           "--worker-gamma", str(prm["gamma"]), "--worker-eps", str(args.eps), "--worker-cache", str(args.cache_mb)]
    if sparse:
        cmd.append("--worker-sparse")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "build" / "python"), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise RuntimeError(f"{kind} {dtype} exited {r.returncode}: {r.stderr.strip()[-400:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def median_of(runs, key):
    return statistics.median(r[key] for r in runs)


def bench_case(case, args, data_dir):
    kind, _, n = case.partition("-")
    if kind == "fmnist":
        train, test, features = prepare_fmnist(data_dir, int(n))
    elif kind == "sparse":
        train, test, features = prepare_sparse(data_dir)
    else:
        raise SystemExit(f"unknown case {case}: fmnist-N or sparse")
    prm = PARAMS[kind]
    common = ["-c", str(prm["C"]), "-g", str(prm["gamma"]), "-e", str(args.eps), "-m", str(args.cache_mb)]
    rows, failed = [], False
    lib_svs = None

    def add(row):
        rows.append(row)
        print(f"  {case}: {row['method']:<34} fit {row['fit']:8.2f} s  wall {row.get('wall', float('nan')):8.2f} s"
              f"  {row['accuracy']:.2f}%  obj {row['obj']:.6f}  nSV {row['nSV']}  {row['peak_mb']:.0f} MB", flush=True)

    if not args.skip_libsvm:
        model = data_dir / f"libsvm_{case}.model"
        wall, out, peak = timed(["svm-train", *common, str(train), str(model)])
        _, pout, _ = timed(["svm-predict", str(test), str(model), str(data_dir / "libsvm.pred")])
        obj = float(re.findall(r"obj = (-?[0-9.e+-]+)", out)[-1])
        lib_svs = sv_lines(model)
        add({"method": "LIBSVM svm-train", "fit": wall, "wall": wall, "accuracy": accuracy_of(pout), "obj": obj,
             "nSV": len(lib_svs), "peak_mb": peak})
    peers = [("sklearnex", "float64"), ("sklearnex", "float32")]
    if not args.skip_sklearn:
        peers.append(("sklearn", "float64"))
    peers += [("accel", "float32"), ("accel", "float64")]
    names = {"sklearnex": "scikit-learn-intelex SVC", "sklearn": "scikit-learn SVC", "accel": "accel.sklearn SVC"}
    for peer, dtype in peers:
        runs = [run_python(peer, dtype, train, test, features, kind == "sparse", prm, args)
                for _ in range(args.repeat if peer != "sklearn" else 1)]
        name = f"{names[peer]} {dtype}"
        add({"method": name, "fit": median_of(runs, "fit"), "accuracy": runs[0]["accuracy"], "obj": runs[0]["obj"],
             "nSV": runs[0]["nSV"], "peak_mb": max(r["peak_mb"] for r in runs), "fits": [r["fit"] for r in runs]})
    for solver in args.solvers:
        model = data_dir / f"accel_{case}_{solver}.model"
        runs = []
        try:
            for _ in range(args.repeat if solver == "batch" else 1):
                wall, out, peak = timed([args.accel, "svm-train", *common, "--solver", solver, "--json", train, model])
                info = json.loads(out)
                runs.append({"fit": info["seconds"]["total"], "wall": wall, "peak_mb": peak, "info": info})
            _, pout, _ = timed([args.accel, "svm-predict", test, model, data_dir / "accel.pred"])
        except (RuntimeError, json.JSONDecodeError) as e:
            print(f"  accel --solver {solver}: FAILED: {e}", file=sys.stderr)
            failed = True
            continue
        p = runs[0]["info"]["problems"][0]
        row = {"method": f"accel svm-train --solver {solver}", "fit": median_of(runs, "fit"),
               "wall": median_of(runs, "wall"), "accuracy": accuracy_of(pout), "obj": p["obj"], "nSV": p["nSV"],
               "peak_mb": max(r["peak_mb"] for r in runs), "fits": [r["fit"] for r in runs],
               "rounds": p["rounds"], "ws_size": p["ws_size"], "shrink": p["shrink"]}
        if lib_svs is not None:
            row["sv_diff_vs_libsvm"] = sv_difference(sv_lines(model), lib_svs)
        add(row)
    print_table(case, prm, args, rows)
    return rows, failed


def print_table(case, prm, args, rows):
    accel = next((r for r in rows if r["method"] == "accel svm-train --solver batch"), None)
    lib = next((r for r in rows if r["method"] == "LIBSVM svm-train"), None)
    print(f"\n{case}: RBF C={prm['C']:g} gamma={prm['gamma']:g} eps={args.eps:g}, -m {args.cache_mb:g}")
    print(f"{'method':<36}{'acc %':>7}{'fit s':>9}{'wall s':>9}{'accel x':>9}{'obj':>18}{'rel obj':>10}"
          f"{'nSV':>7}{'SV diff':>8}{'peak MB':>9}")
    for r in rows:
        # accel's speedup over this method: fit against fit, except svm-train (wall against wall).
        if accel is None:
            ratio = "-"
        elif r["method"] == "LIBSVM svm-train":
            ratio = f"{r['wall'] / accel['wall']:.2f}x"
        else:
            ratio = f"{r['fit'] / accel['fit']:.2f}x"
        rel = f"{abs(r['obj'] - lib['obj']) / abs(lib['obj']):.1e}" if lib else "-"
        print(f"{r['method']:<36}{r['accuracy']:>7.2f}{r['fit']:>9.2f}{r.get('wall', float('nan')):>9.2f}{ratio:>9}"
              f"{r['obj']:>18.6f}{rel:>10}{r['nSV']:>7}{str(r.get('sv_diff_vs_libsvm', '-')):>8}{r['peak_mb']:>9.0f}")
    if accel:
        print(f"accel: {accel['rounds']} rounds of {accel['ws_size']}, shrink {accel['shrink']}; fits "
              + ", ".join(f"{t:.2f}" for t in accel["fits"]))
        for r in rows:  # the Python estimator's fit() over the CLI's solver time (target <= 5%)
            if r["method"].startswith("accel.sklearn"):
                print(f"{r['method']}: fit {r['fit']:.2f} s against svm-train's {accel['fit']:.2f} s: "
                      f"overhead {100 * (r['fit'] / accel['fit'] - 1):+.1f}%")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", nargs="+", default=["fmnist-10000", "sparse"], help="fmnist-N (N training rows), sparse")
    ap.add_argument("--solvers", nargs="+", default=["batch"], help="accel --solver values (batch, pair)")
    ap.add_argument("--eps", type=float, default=1e-3)
    ap.add_argument("--cache-mb", type=float, default=100)
    ap.add_argument("--repeat", type=int, default=3, help="runs of accel batch and scikit-learn-intelex (median)")
    ap.add_argument("--skip-libsvm", action="store_true")
    ap.add_argument("--skip-sklearn", action="store_true")
    ap.add_argument("--accel", default=str(REPO / "build" / "bin" / "accel"))
    ap.add_argument("--data-dir", default=str(REPO / "build" / "bench_svm_data"))
    ap.add_argument("--json", help="also write the results here")
    for opt, typ in [("worker", str), ("worker-dtype", str), ("worker-train", str), ("worker-test", str),
                     ("worker-features", int), ("worker-C", float), ("worker-gamma", float), ("worker-eps", float),
                     ("worker-cache", float)]:
        ap.add_argument("--" + opt, type=typ, help=argparse.SUPPRESS)
    ap.add_argument("--worker-sparse", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        python_worker(args)
        return 0

    data_dir = Path(args.data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    print(f"host: {os.cpu_count()} CPUs; timings are wall clock on a possibly shared machine")
    results, failed = {}, False
    for case in args.cases:
        rows, f = bench_case(case, args, data_dir)
        results[case] = rows
        failed = failed or f
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
