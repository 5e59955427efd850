#!/usr/bin/env python3
"""k-means seeding at scale: accel's k-means++ and k-means|| against the
cost of its Lloyd iterations on the same data, and scikit-learn's
k-means++ (sklearn.cluster.kmeans_plusplus, greedy, 2 + ln k trials a
center) on the same rows.

Target (issue 18): on 10M rows with K = 1024 each seeding costs less than
3 Lloyd iterations. Printed: seconds of each seeding, a Lloyd iteration's
seconds (the median of --lloyd-iters iterations from accel's --log-json,
seeded from a file so that no seeding runs), the ratio, and scikit-learn's
time. Data: --n rows of --d float32 around 64 Gaussian centers, cached
under --data-dir.

    .bench-venv/bin/python scripts/bench_kmeans_init.py            # 10M x 100, K=1024
    .bench-venv/bin/python scripts/bench_kmeans_init.py --n 1000000 --k 256 --skip-sklearn
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(os.environ.get("ACCEL_REPO") or Path(__file__).resolve().parent.parent)


def make(path, n, d):
    rng = np.random.default_rng(11)
    centers = rng.uniform(-5, 5, size=(64, d)).astype(np.float32)
    hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (n, d)
    hdr += " " * (64 - (10 + len(hdr) + 1) % 64) + "\n"
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + len(hdr).to_bytes(2, "little") + hdr.encode())
        step = max(1, (1 << 24) // d)
        for s in range(0, n, step):
            m = min(step, n - s)
            (centers[rng.integers(0, 64, size=m)] + rng.standard_normal((m, d), dtype=np.float32)).tofile(f)
    os.replace(tmp, path)


def accel(args, x_path, init, iters, log=None):
    cmd = [args.accel, "kmeans", "--input", x_path, "--k", args.k, "--max-iter", iters, "--tol", 0, "--init", init,
           "--algorithm", "lloyd", "--device", "cpu", "--json"] + (["--log-json", log] if log else [])
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"accel kmeans failed: {p.stderr.strip()}")
    return json.loads(p.stdout)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--accel", default=str(REPO / "build" / "bin" / "accel"))
    p.add_argument("--n", type=int, default=10_000_000)
    p.add_argument("--d", type=int, default=100)
    p.add_argument("--k", type=int, default=1024)
    p.add_argument("--lloyd-iters", type=int, default=3)
    p.add_argument("--skip-sklearn", action="store_true")
    p.add_argument("--data-dir", type=Path, default=REPO / "build" / "bench-data")
    a = p.parse_args()
    a.data_dir.mkdir(parents=True, exist_ok=True)
    x_path = a.data_dir / f"init-n{a.n}-d{a.d}.npy"
    if not x_path.exists():
        print(f"generating {x_path}", flush=True)
        make(x_path, a.n, a.d)
    x = np.load(x_path, mmap_mode="r")
    with tempfile.TemporaryDirectory() as tmp:
        c0 = Path(tmp) / "c0.npy"
        np.save(c0, np.ascontiguousarray(x[:a.k]))
        log = Path(tmp) / "lloyd.jsonl"
        accel(a, x_path, c0, a.lloyd_iters, log)
        its = sorted(json.loads(line)["seconds"] for line in log.read_text().splitlines())
        lloyd = its[len(its) // 2]
        print(f"{a.n} x {a.d}, K={a.k}: a Lloyd iteration {lloyd:.2f} s (median of {len(its)})", flush=True)
        rows = []
        for init in ("kmeans++", "kmeans-parallel"):
            out = accel(a, x_path, init, 1)
            s = out["seconds"]["init"]
            rows.append((f"accel {init}", s))
            print(f"  accel {init:<16} {s:8.2f} s = {s / lloyd:5.2f} Lloyd iterations (target < 3)", flush=True)
    if not a.skip_sklearn:
        from sklearn.cluster import kmeans_plusplus
        from threadpoolctl import threadpool_limits
        xm = np.ascontiguousarray(x)
        with threadpool_limits(limits=os.cpu_count()):
            t0 = time.perf_counter()
            kmeans_plusplus(xm, a.k, random_state=0)
            s = time.perf_counter() - t0
        print(f"  sklearn kmeans_plusplus {s:8.2f} s = {s / lloyd:5.2f} Lloyd iterations; "
              + ", ".join(f"{name} {s / t:.1f}x faster" for name, t in rows), flush=True)


if __name__ == "__main__":
    main()
