#!/usr/bin/env python3
"""accel.sklearn's Python overhead over the compute it calls, in one process.

Alternates, --repeat times, an estimator's fit() with the C++ call it ends
in, made directly on inputs prepared outside the timing (as the CLI's own
seconds leave out reading its file): KMeans on Fashion-MNIST's 60,000 images
(K = 256, 20 Lloyd iterations from the same initial centers) and SVC on the
first 10,000 (even against odd classes, RBF C = 10, gamma = 0.02, as
bench_svm.py's fmnist-10000). Prints each pair's overhead and the median
(target: at most 5%). One process removes the spread that separate
processes add (bench_kmeans.py and bench_svm.py compare separate runs).

    PYTHONPATH=build/python python3 scripts/bench_sklearn_overhead.py [--repeat 7]
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "build" / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from accel import _accel  # noqa: E402
from accel.sklearn import SVC, KMeans  # noqa: E402
from bench_svm import FASHION, read_idx  # noqa: E402


def pairs(repeat, python_fit, direct):
    """(fit() seconds, the direct call's seconds) `repeat` times, alternated;
    direct() returns the seconds of what it times."""
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        python_fit()
        out.append((time.perf_counter() - t, direct()))
    return out


def timed(call):
    t = time.perf_counter()
    call()
    return time.perf_counter() - t


def report(name, runs):
    over = [p / c - 1 for p, c in runs]
    print(f"{name}: fit() median {statistics.median(p for p, _ in runs):.3f} s, direct "
          f"{statistics.median(c for _, c in runs):.3f} s; overhead median {100 * statistics.median(over):+.1f}% "
          f"(runs: {', '.join(f'{100 * o:+.1f}' for o in over)}; target <= 5%)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=7)
    a = ap.parse_args()
    _accel.devices()  # discovery once a process, outside the timing as in the CLI's seconds
    images = read_idx(FASHION / "train-images-idx3-ubyte.gz").reshape(60000, -1)
    labels = read_idx(FASHION / "train-labels-idx1-ubyte.gz")

    x = np.ascontiguousarray(images, dtype=np.float32) / np.float32(255)
    c0 = np.ascontiguousarray(x[np.random.default_rng(0).choice(len(x), 256, replace=False)])
    km = KMeans(256, init=c0, max_iter=20, tol=0, algorithm="lloyd", device="cpu")
    report("KMeans 60000 x 784, K = 256, 20 iterations", pairs(
        a.repeat, lambda: km.fit(x),
        lambda: timed(lambda: _accel.kmeans_fit(x, 256, "", c0, 20, 0.0, 0, "lloyd", "cpu", None))))

    xs, ys = x[:10000], (labels[:10000] % 2).astype(np.int64)
    svc = SVC(C=10, gamma=0.02, cache_size=100, device="cpu")
    svc.fit(xs[:100], ys[:100])

    def direct():
        csr = _accel.csr_dense(xs)  # what svm-train has parsed before its clock starts: not timed
        return timed(lambda: _accel.svm_fit(csr, ys.astype(np.float64), svc._accel_params, "cpu", None))

    for dtype in (np.float32, np.float64):
        xd = xs.astype(dtype)
        report(f"SVC 10000 x 784 ({np.dtype(dtype).name} rows)", pairs(a.repeat, lambda: svc.fit(xd, ys), direct))

if __name__ == "__main__":
    main()
