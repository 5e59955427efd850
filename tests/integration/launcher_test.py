#!/usr/bin/env python3
"""One command under a launcher: every rank runs `accel kmeans|svm-train ...
--distributed`; rank 0 coordinates, the others work, and they meet through
a rendezvous file rank 0 writes (its address and a fresh token).

- mpirun -n 4 (Debian's OpenMPI): k-means centroids equal single-node's;
- mpirun -n 3: svm-train's model predicts as single-node's does;
- srun's environment, simulated (SLURM_PROCID/NTASKS/JOB_ID/STEP_ID on
  three processes started by hand): the same centroids;
- no launcher, one rank, or a rendezvous that never comes: one line, exit 2.

Exit 77 (skipped) without mpirun."""
import argparse
import array
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def write_npy(path, n, d, seed):
    rng = random.Random(seed)
    centers = [[rng.uniform(-10, 10) for _ in range(d)] for _ in range(6)]
    v = array.array("f", (centers[i % 6][j] + rng.gauss(0, 1) for i in range(n) for j in range(d)))
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (n, d)
    header += " " * (64 - (10 + len(header) + 1) % 64) + "\n"
    Path(path).write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + v.tobytes())


def read_npy(path):
    b = Path(path).read_bytes()
    hlen = struct.unpack("<H", b[8:10])[0]
    a = array.array("f")
    a.frombytes(b[10 + hlen:])
    return a


def write_libsvm(path, n, seed):
    rng = random.Random(seed)
    with open(path, "w") as f:
        for i in range(n):
            y = 1 if i % 2 else -1
            x = [rng.gauss(0.8 * y, 1) for _ in range(5)]
            f.write(f"{y} " + " ".join(f"{j + 1}:{v:.5g}" for j, v in enumerate(x)) + "\n")


def run(cmd, cwd, env=None, timeout=180):
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--accel", required=True)
    a = p.parse_args()
    accel = os.path.abspath(a.accel)
    mpirun = shutil.which("mpirun")
    if not mpirun:
        print("SKIP: mpirun not installed (Debian's openmpi-bin)")
        sys.exit(77)
    mpi = [mpirun, "--oversubscribe"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for v in ("ACCEL_COORDINATOR", "RANK", "WORLD_SIZE"):
        env.pop(v, None)
    kmeans = ["kmeans", "--input", "x.npy", "--k", "6", "--max-iter", "15", "--tol", "0", "--init", "kmeans-parallel",
              "--device", "cpu"]
    with tempfile.TemporaryDirectory(prefix="accel-launcher-") as tmp:
        write_npy(Path(tmp) / "x.npy", 60000, 8, 3)
        r = run([accel, *kmeans, "--output-centroids", "single.npy"], tmp, env)
        if r.returncode != 0:
            fail(r.stderr)
        single = read_npy(Path(tmp) / "single.npy")

        def same(name, what):
            got = read_npy(Path(tmp) / name)
            worst = max(abs(x - y) / (1 + abs(y)) for x, y in zip(got, single))
            print(f"{what}: centroids within {worst:.1e} of single-node")
            if worst > 1e-6:
                fail(f"{what}: the centroids differ from single-node's")

        r = run([*mpi, "-n", "4", accel, *kmeans, "--distributed", "--listen", "127.0.0.1:0", "--output-centroids",
                 "mpi.npy"], tmp, env)
        if r.returncode != 0 or "3 workers" not in r.stdout:
            fail(f"mpirun -n 4: exit {r.returncode}: {r.stdout[-500:]} {r.stderr[-1500:]}")
        same("mpi.npy", "mpirun -n 4 accel kmeans --distributed")

        # srun's environment by hand: three ranks of one step of one job.
        procs = [subprocess.Popen([accel, *kmeans, "--distributed", "--listen", "127.0.0.1:0", "--output-centroids",
                                   "srun.npy"], cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=dict(env, SLURM_PROCID=str(i), SLURM_NTASKS="3", SLURM_JOB_ID="77",
                                           SLURM_STEP_ID="0")) for i in range(3)]
        outs = [q.communicate(timeout=180) for q in procs]
        if any(q.returncode != 0 for q in procs):
            fail(f"srun's environment: exits {[q.returncode for q in procs]}: {outs}")
        same("srun.npy", "srun's environment, 3 ranks")
        if any(n.startswith(".accel-rendezvous") for n in os.listdir(tmp)):
            fail("a rendezvous file was left behind")

        write_libsvm(Path(tmp) / "train.txt", 400, 5)
        svm = ["svm-train", "-c", "4", "-g", "0.2", "-q"]
        r = run([accel, *svm, "train.txt", "single.model"], tmp, env)
        r2 = run([*mpi, "-n", "3", accel, *svm, "--distributed", "--listen", "127.0.0.1:0", "train.txt", "mpi.model"],
                 tmp, env)
        if r.returncode != 0 or r2.returncode != 0:
            fail(f"svm-train: {r.stderr[-300:]} / mpirun -n 3: {r2.stdout[-300:]} {r2.stderr[-1500:]}")
        acc = [run([accel, "svm-predict", "train.txt", m, m + ".out"], tmp, env).stdout.strip()
               for m in ("single.model", "mpi.model")]
        print(f"svm-train, single-node: {acc[0]}; mpirun -n 3 --distributed: {acc[1]}")
        if acc[0] != acc[1] or "Accuracy" not in acc[0]:
            fail("the distributed model predicts otherwise")

        # Bad input: one line, exit 2.
        for cmd, want, e in (([accel, *kmeans, "--distributed"], "no launcher's rank", env),
                             ([*mpi, "-n", "1", accel, *kmeans, "--distributed"], "started 1 rank", env),
                             ([accel, *kmeans, "--distributed", "--rendezvous", "never", "--join-timeout-ms", "300"],
                              "wrote no rendezvous to never",
                              dict(env, SLURM_PROCID="1", SLURM_NTASKS="2", SLURM_JOB_ID="78"))):
            r = run(cmd, tmp, e)
            # accel's one line first (mpirun adds its own report after it).
            if r.returncode != 2 or want not in r.stderr.splitlines()[0]:
                fail(f"{cmd[-3:]}: exit {r.returncode}, {r.stderr!r}")
        print("no launcher, one rank and a missing rendezvous: one line each, exit 2")
    print("PASS")


if __name__ == "__main__":
    main()
