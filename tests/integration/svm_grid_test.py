#!/usr/bin/env python3
"""LIBSVM's own grid search runs accel: `svm-grid -svmtrain accel-svm-train`
(Debian's libsvm-tools) over a grid of (C, gamma), beside the same grid with
LIBSVM's svm-train. Every grid point must come back with a rate; accel's
best rate must come within TOL points of LIBSVM's, and LIBSVM must rate
accel's choice within TOL of its own best. The folds are each tool's own
shuffle, so rates differ by a few rows a point. Then accel-svm-predict
scores a model at the chosen point. Exit 77 (skipped) without svm-grid."""
import argparse
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

TOL = 3.0  # points of cross-validation accuracy


def write_rings(path, n, seed):
    # Two noisy rings in the first two features, two features of noise:
    # gamma matters, and C trades the noise.
    rng = random.Random(seed)
    with open(path, "w") as f:
        for i in range(n):
            label = 1 if i % 2 else -1
            r = (1.0 if label > 0 else 2.0) + rng.gauss(0, 0.35)
            t = rng.uniform(0, 6.283185307)
            x = [r * math.cos(t), r * math.sin(t), rng.gauss(0, 1), rng.gauss(0, 1)]
            f.write(f"{label} " + " ".join(f"{j + 1}:{v:.6g}" for j, v in enumerate(x)) + "\n")


def grid(svm_grid, train, data, out, cwd):
    r = subprocess.run([svm_grid, "-svmtrain", train, "-gnuplot", "null", "-log2c", "-3,9,2", "-log2g", "-9,1,2",
                        "-v", "5", "-out", str(out), str(data)], capture_output=True, text=True, cwd=cwd, timeout=600)
    if r.returncode != 0:
        sys.exit(f"FAIL: svm-grid with {train}: {r.stderr[-500:]}")
    rates = {}
    for line in out.read_text().splitlines():
        m = re.match(r"log2c=(\S+) log2g=(\S+) rate=(\S+)", line)
        if m:
            rates[(float(m[1]), float(m[2]))] = float(m[3])
    c, g, rate = r.stdout.strip().splitlines()[-1].split()
    return rates, (float(c), float(g), float(rate))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--accel-svm-train", required=True)
    p.add_argument("--accel-svm-predict", required=True)
    a = p.parse_args()
    # Absolute, not resolved: the link's name is what makes accel svm-train.
    a.accel_svm_train, a.accel_svm_predict = map(os.path.abspath, (a.accel_svm_train, a.accel_svm_predict))
    svm_grid, svm_train = shutil.which("svm-grid"), shutil.which("svm-train")
    if not svm_grid or not svm_train:
        print("SKIP: svm-grid or svm-train not installed (Debian's libsvm-tools)")
        sys.exit(77)
    with tempfile.TemporaryDirectory(prefix="accel-svm-grid-") as tmp:
        tmp = Path(tmp)
        data = tmp / "rings.txt"
        write_rings(data, 300, 5)
        ours, (c, g, best) = grid(svm_grid, a.accel_svm_train, data, tmp / "accel.out", tmp)
        theirs, (lc, lg, lbest) = grid(svm_grid, svm_train, data, tmp / "libsvm.out", tmp)
        if len(ours) != 42 or set(ours) != set(theirs):
            sys.exit(f"FAIL: accel rated {len(ours)} of LIBSVM's {len(theirs)} grid points")
        at = theirs[(math.log2(c), math.log2(g))]
        diffs = [abs(ours[k] - theirs[k]) for k in ours]
        print(f"svm-grid: accel's best c={c:g} g={g:g} at {best:.2f}% (LIBSVM rates it {at:.2f}%); LIBSVM's best "
              f"c={lc:g} g={lg:g} at {lbest:.2f}%; over the grid rates differ by {max(diffs):.2f} points at most, "
              f"{sum(diffs) / len(diffs):.2f} on average")
        if abs(best - lbest) > TOL or lbest - at > TOL:
            sys.exit(f"FAIL: accel's grid search is more than {TOL} points from LIBSVM's")
        model = tmp / "m"
        r = subprocess.run([a.accel_svm_train, "-c", f"{c:g}", "-g", f"{g:g}", "-q", str(data), str(model)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"FAIL: accel-svm-train: {r.stderr}")
        r = subprocess.run([a.accel_svm_predict, str(data), str(model), str(tmp / "pred")], capture_output=True,
                           text=True)
        if r.returncode != 0 or not re.search(r"Accuracy = [0-9.]+% \(\d+/300\)", r.stdout):
            sys.exit(f"FAIL: accel-svm-predict: {r.stdout} {r.stderr}")
        print(r.stdout.strip())
    print("PASS")


if __name__ == "__main__":
    main()
