#!/usr/bin/env python3
"""The figures of [Antimatroid] for accel's distributed job, as PNG.

  Fig. 3: transfer rate vs block size for a fixed payload (128 MiB)
  Fig. 4: transfer rate vs payload for 64 MiB blocks
  Fig. 5: synchronization time per iteration, per participant, with a
          worker's departure and return marked

    .bench-venv/bin/python scripts/plot_cluster.py [--transfer] [--cluster-dir build/cluster] [--out build/plots]

--transfer runs accel_transfer_bench (two processes on 127.0.0.1) for the
sweeps of Fig. 3 and 4 over shared memory and tcp; --cluster-dir reads the
JSON-lines logs of a scripts/cluster.sh run (e.g. one with --kill-restart).
"""
import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

REPO = Path(__file__).resolve().parent.parent
TLS = {"shm": ("posix,cma,self", "off"), "tcp": ("tcp", "on")}


def transfer(bench, tls, pf, block, total):
    """MiB/s of one measured transfer (best of the non-warm-up ones)."""
    with tempfile.TemporaryDirectory() as d:
        addr = Path(d) / "addr"
        server = subprocess.Popen([bench, "--role", "server", "--address-file", str(addr), "--tls", tls,
                                   "--peer-failure", pf, "--block", str(block), "--total", str(total), "--reps", "3"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(200):
                if addr.exists() and addr.stat().st_size > 0:
                    break
                time.sleep(0.05)
            out = subprocess.run([bench, "--role", "client", "--address-file", str(addr), "--tls", tls,
                                  "--peer-failure", pf, "--block", str(block), "--total", str(total), "--reps", "3"],
                                 capture_output=True, text=True, timeout=300)
            j = json.loads(out.stdout.strip().splitlines()[-1])
            return j.get("mib_per_s") or j.get("best_mib_per_s") or max(j.get("rates_mib_per_s", [0]))
        finally:
            server.kill()


def fig_transfers(bench, out):
    blocks = [8 << 10, 64 << 10, 512 << 10, 4 << 20, 16 << 20, 64 << 20]
    payloads = [64 << 20, 128 << 20, 256 << 20, 512 << 20, 1 << 30]
    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    for name, (tls, pf) in TLS.items():
        r3 = [transfer(bench, tls, pf, b, 128 << 20) for b in blocks]
        r4 = [transfer(bench, tls, pf, 64 << 20, p) for p in payloads]
        print(name, "block sweep", [round(x) for x in r3], "payload sweep", [round(x) for x in r4])
        ax[0].plot([b / 1024 for b in blocks], r3, marker="o", label=name)
        ax[1].plot([p / 2**20 for p in payloads], r4, marker="o", label=name)
    ax[0].set(xscale="log", xlabel="block size (KiB)", ylabel="MiB/s", title="128 MiB payload (seed Fig. 3)")
    ax[1].set(xscale="log", xlabel="payload (MiB)", ylabel="MiB/s", title="64 MiB blocks (seed Fig. 4)")
    for a in ax:
        a.grid(True, which="both", alpha=0.3)
        a.legend()
    fig.tight_layout()
    fig.savefig(out / "transfer.png", dpi=110)
    print("wrote", out / "transfer.png")


def fig_sync(cluster_dir, out):
    series, events = {}, []
    for f in sorted(Path(cluster_dir).glob("*.jsonl")):
        for line in f.read_text().splitlines():
            j = json.loads(line)
            if "synchronizing_s" in j:
                series.setdefault(j["participant"], []).append((j["iteration"], j["synchronizing_s"] * 1e3))
            if f.name.startswith("coordinator"):
                if j.get("evicted"):
                    events.append((j["iteration"], f"worker {j['evicted']} leaves", "tab:red"))
                if j.get("event") == "resynchronized":
                    events.append((j["iteration"], f"worker {j['worker']} back ({j['reintegration_s'] * 1e3:.0f} ms)",
                                   "tab:green"))
    fig, ax = plt.subplots(figsize=(8, 4))
    for pid, pts in sorted(series.items()):
        pts.sort()
        gapped = []  # a break in the line while the participant was away
        for i, pt in enumerate(pts):
            if i and pt[0] - pts[i - 1][0] > 1:
                gapped.append((pt[0] - 1, float("nan")))
            gapped.append(pt)
        ax.plot(*zip(*gapped), label="coordinator" if pid == 0 else f"worker {pid}", lw=1)
    for it, text, color in events:
        ax.axvline(it, color=color, ls="--", lw=1)
        ax.text(it, ax.get_ylim()[1] * 0.9, text, color=color, rotation=90, va="top", fontsize=8)
    ax.set(xlabel="iteration", ylabel="synchronization (ms)", yscale="log",
           title="synchronization per iteration (seed Fig. 5)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "sync.png", dpi=110)
    print("wrote", out / "sync.png")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--transfer", action="store_true", help="run the transfer sweeps (Fig. 3, 4)")
    p.add_argument("--bench", default=str(REPO / "build" / "bin" / "accel_transfer_bench"))
    p.add_argument("--cluster-dir", help="logs of a scripts/cluster.sh run (Fig. 5)")
    p.add_argument("--out", default=str(REPO / "build" / "plots"))
    a = p.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if a.transfer:
        fig_transfers(a.bench, out)
    if a.cluster_dir:
        fig_sync(a.cluster_dir, out)
    if not a.transfer and not a.cluster_dir:
        p.error("nothing to plot: give --transfer and/or --cluster-dir")


if __name__ == "__main__":
    main()
