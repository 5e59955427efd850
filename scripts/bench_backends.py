#!/usr/bin/env python3
"""Every available backend's rate per kernel beside the cpu's.

    scripts/bench_backends.py [--runs N] [--repeats R] [--device SPEC] [--accel BIN]

Runs `accel bench-kernels --json` N times (each run times every device on
the same inputs: Fashion-MNIST's 60,000 images with K = 256 for
kmeans_assign, 64 queries x 60,000 CSR rows for csr_kernel_rows, 16M floats
for topk_histogram) and prints, per kernel and device, the median rate and
the median of each run's time over the cpu's (ratios of one run: this host
is shared and noisy). The last column is how the device's outputs differ
from the cpu's in the last run.
"""
import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3, help="timed launches per kernel and device in each run")
    ap.add_argument("--device", default="", help="accel's --device spec (default: every device)")
    ap.add_argument("--accel", default=str(ROOT / "build" / "bin" / "accel"))
    a = ap.parse_args()
    cmd = [a.accel, "bench-kernels", "--json", "--repeats", str(a.repeats)]
    if a.device:
        cmd += ["--device", a.device]
    rows, last = {}, {}
    for run in range(a.runs):
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"bench_backends: {' '.join(cmd)} failed: {r.stderr.strip()}")
        j = json.loads(r.stdout)
        for line in j["results"]:
            key = (line["kernel"], line["device"])
            rows.setdefault(key, []).append(line)
            last[key] = line["against_cpu"]
        print(f"run {run + 1}/{a.runs} done", file=sys.stderr)
    print(f"images: {j['images']}; {j['rows']} rows, K = {j['k']}; {j['floats']} floats; medians of {a.runs} runs")
    print(f"{'kernel':16} {'device':10} {'rate':>14} {'unit':16} {'x cpu time':>10}  against the cpu")
    for (kernel, device), lines in rows.items():
        rate = statistics.median(x["rate"] for x in lines)
        ratio = statistics.median(x["times_cpu"] for x in lines)
        print(f"{kernel:16} {device:10} {rate:14.4g} {lines[0]['unit']:16} {ratio:10.2f}  {json.dumps(last[(kernel, device)])}")


if __name__ == "__main__":
    main()
