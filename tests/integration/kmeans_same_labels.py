"""k-means on another backend gives the cpu's labels exactly (issue 28): Fashion-MNIST,
K = 256, 5 Lloyd iterations from the same random init, every row's final
label compared. Backends settle near ties in double as the cpu does (a row
whose two best float scores lie within their rounding bound); PoCL's
OpenCL had labelled one row differently, and the inertia drifted 1.8e-6.
Exit 77 (skipped) without the data set.

  python3 kmeans_same_labels.py ACCEL DEVICE WORKDIR
"""
import os
import subprocess
import sys

import numpy as np

DATA = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"


def labels(accel, device, out):
    subprocess.run([accel, "kmeans", "--input", DATA, "--k", "256", "--max-iter", "5", "--tol", "0", "--init", "random",
                    "--seed", "1", "--device", device, "--output-labels", out], check=True, capture_output=True)
    return np.load(out)


def main():
    accel, device, work = sys.argv[1:4]
    if not os.path.exists(DATA):
        print(f"skipped: no {DATA} (Debian's dataset-fashion-mnist)")
        return 77
    os.makedirs(work, exist_ok=True)
    cpu = labels(accel, "cpu", os.path.join(work, "cpu.npy"))
    other = labels(accel, device, os.path.join(work, "other.npy"))
    differ = np.flatnonzero(cpu != other)
    print(f"{device} against cpu, Fashion-MNIST K = 256, 5 iterations: {len(differ)} of {len(cpu)} labels differ"
          + (f" (rows {differ[:10].tolist()})" if len(differ) else ""))
    return 1 if len(differ) else 0


if __name__ == "__main__":
    sys.exit(main())
