#!/usr/bin/env python3
"""Side-by-side SVM training benchmark: LIBSVM svm-train vs scikit-learn SVC
vs accel svm-train (one run per shrinking heuristic).

The case is the seed's MNIST setup (seeds/001 Table 2) on Fashion-MNIST:
even-numbered classes (-1) against odd-numbered classes (+1), pixels scaled
to [0, 1], RBF kernel, C = 10, gamma = 0.02 (sigma^2 = 25), eps = 1e-3, the
same 100 MB kernel cache for all three; trained on the first N training
images and tested on the 10,000 test images. Prints a table like the seed's
Fig. 9: accuracy, training time, speedup over svm-train and over accel
without shrinking. Run it with the benchmark venv's python
(scripts/setup_bench.sh creates it):

    .bench-venv/bin/python scripts/bench_svm.py --rows 10000

Data files (LIBSVM text) are cached under --data-dir. ACCEL_REPO overrides
the repository root the defaults derive from. Exit status: 0 when every
method ran, 1 when accel failed.
"""

import argparse
import gzip
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(os.environ.get("ACCEL_REPO", Path(__file__).resolve().parent.parent))
FASHION = Path("/usr/share/datasets/fashion-mnist")


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def write_libsvm(path, x, y):
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w") as f:
        for xi, yi in zip(x, y):
            nz = np.nonzero(xi)[0]
            f.write("%d %s\n" % (yi, " ".join("%d:%.6g" % (j + 1, xi[j]) for j in nz)))
    tmp.rename(path)


def prepare(data_dir, rows):
    data_dir.mkdir(parents=True, exist_ok=True)
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
    return train, test


def load_libsvm(path):
    from sklearn.datasets import load_svmlight_file

    x, y = load_svmlight_file(str(path), n_features=784)
    # Dense, as scikit-learn users hold images (its sparse path also rejects
    # the int64 indices load_svmlight_file produces here).
    return x.toarray(), y


def timed(cmd):
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} exited {r.returncode}: {r.stderr.strip()}")
    return dt, r.stdout


def accuracy_of(predict_stdout):
    m = re.search(r"Accuracy = ([0-9.]+)%", predict_stdout)
    return float(m.group(1)) if m else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, nargs="+", default=[10000], help="training rows (60000 = all)")
    ap.add_argument("--heuristics", nargs="+",
                    default=["none", "single1000", "single5pc", "multi2", "multi500", "multi1000", "multi5pc",
                             "multi10pc", "multi50pc"],
                    help="accel --shrink values (seeds/001 Table 3)")
    ap.add_argument("--wss", type=int, nargs="+", default=[1], help="accel working-set selection orders to run")
    ap.add_argument("--C", type=float, default=10.0)
    ap.add_argument("--gamma", type=float, default=0.02)
    ap.add_argument("--eps", type=float, default=1e-3)
    ap.add_argument("--cache-mb", type=float, default=100)
    ap.add_argument("--skip-libsvm", action="store_true")
    ap.add_argument("--skip-sklearn", action="store_true")
    ap.add_argument("--accel", default=str(REPO / "build" / "bin" / "accel"))
    ap.add_argument("--data-dir", default=str(REPO / "build" / "bench_svm_data"))
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()

    data_dir = Path(args.data_dir)
    common = ["-c", str(args.C), "-g", str(args.gamma), "-e", str(args.eps), "-m", str(args.cache_mb)]
    results = []
    failed = False
    print(f"host: {os.cpu_count()} CPUs; timings are wall clock on a possibly shared machine")
    for rows in args.rows:
        train, test = prepare(data_dir, rows)
        runs = []
        if not args.skip_libsvm:
            model = data_dir / f"libsvm_{rows}.model"
            t, _ = timed(["svm-train", "-q", *common, str(train), str(model)])
            _, out = timed(["svm-predict", str(test), str(model), str(data_dir / "libsvm.pred")])
            runs.append({"method": "LIBSVM svm-train", "seconds": t, "accuracy": accuracy_of(out)})
            print(f"  {rows} rows  {runs[-1]['method']:<28} {t:9.2f} s  {runs[-1]['accuracy']:.2f}%", flush=True)
        if not args.skip_sklearn:
            from sklearn.svm import SVC

            xtr, ytr = load_libsvm(train)
            xte, yte = load_libsvm(test)
            clf = SVC(C=args.C, gamma=args.gamma, tol=args.eps, cache_size=args.cache_mb)
            t0 = time.perf_counter()
            clf.fit(xtr, ytr)
            t = time.perf_counter() - t0
            acc = 100.0 * float(np.mean(clf.predict(xte) == yte))
            runs.append({"method": "scikit-learn SVC", "seconds": t, "accuracy": acc})
            print(f"  {rows} rows  {runs[-1]['method']:<28} {t:9.2f} s  {acc:.2f}%", flush=True)
        for wss in args.wss:
            for h in args.heuristics:
                model = data_dir / f"accel_{rows}_{h}_{wss}.model"
                name = f"accel {h}" + ("" if wss == 1 else f" (wss {wss})")
                try:
                    t, out = timed([args.accel, "svm-train", *common, "--shrink", h, "--wss", str(wss), "--json",
                                    str(train), str(model)])
                    info = json.loads(out)
                    _, pout = timed([args.accel, "svm-predict", str(test), str(model), str(data_dir / "accel.pred")])
                except (RuntimeError, json.JSONDecodeError) as e:
                    print(f"  {name}: FAILED: {e}", file=sys.stderr)
                    failed = True
                    continue
                p = info["problems"][0]
                runs.append({"method": name, "seconds": t, "accuracy": accuracy_of(pout), "iterations": p["iterations"],
                             "obj": p["obj"], "rho": p["rho"], "nSV": p["nSV"], "split": info["seconds"],
                             "heuristic": h, "wss": wss})
                print(f"  {rows} rows  {name:<28} {t:9.2f} s  {runs[-1]['accuracy']:.2f}%  iter {p['iterations']}"
                      f"  obj {p['obj']:.4f}  rho {p['rho']:.5f}  nSV {p['nSV']}", flush=True)
        base = next((r["seconds"] for r in runs if r["method"] == "LIBSVM svm-train"), None)
        orig = {r.get("wss"): r["seconds"] for r in runs if r.get("heuristic") == "none"}
        print(f"\nFashion-MNIST even vs odd, {rows} training rows, 10000 test rows, RBF C={args.C:g} gamma={args.gamma:g}"
              f" eps={args.eps:g}, -m {args.cache_mb:g}")
        print(f"{'method':<30}{'accuracy %':>11}{'train s':>10}{'vs svm-train':>14}{'vs accel none':>15}")
        for r in runs:
            sp = f"{base / r['seconds']:.2f}x" if base else "-"
            so = f"{orig[r['wss']] / r['seconds']:.2f}x" if r.get("wss") in orig else "-"
            print(f"{r['method']:<30}{r['accuracy']:>11.2f}{r['seconds']:>10.2f}{sp:>14}{so:>15}")
        results.append({"rows": rows, "runs": runs})
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
