#!/usr/bin/env python3
"""The sparse allreduce against the wire, side by side in one run: P ranks of
`accel sparse-allreduce` on loopback (each contributes ratio * n pairs a step,
8 bytes a pair, sent to every other member) against ucx_perftest moving the
same bytes on the same transport (ucp_am_bw, messages of one contribution,
endpoints with error handling as the engine's).

Printed for each exchange (--exchanges: allgather, one round; reduce-scatter,
two): the median step (the slowest rank's median), the bytes each member
sends a step, the time ucx_perftest needs for those bytes, and their ratio
(target: the step within 8x of the transfer), and each member's CPU time a
step (with more members than cores, a step also waits for the others' CPU). Medians of --repeat runs,
taken alternately (perftest, then each exchange, then perftest ...).
--overlap F draws a fraction F of each member's indices alike in every
member (F = 0: independent draws, the union is the members' pairs together;
F near 1: the union is about one member's pairs, where the reduce-scatter
receives less).

    python3 scripts/bench_sparse_allreduce.py [--size 4] [--n 25000000] [--ratio 0.001] [--overlap 0]
        [--exchanges allgather,reduce-scatter] [--tls tcp]
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(os.environ.get("ACCEL_REPO", Path(__file__).resolve().parent.parent))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def accel_run(a, exchange):
    port = free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1")
    with tempfile.TemporaryDirectory() as tmp:
        procs = [subprocess.Popen([a.accel, "sparse-allreduce", "--rank", str(r), "--size", str(a.size),
                                   "--coordinator", f"127.0.0.1:{port}", "--n", str(a.n), "--ratio", str(a.ratio),
                                   "--steps", str(a.steps), "--tls", a.tls, "--json", "--overlap", str(a.overlap),
                                   "--exchange", exchange], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp)
                 for r in range(a.size)]
        out = []
        for p in procs:
            o, e = p.communicate(timeout=600)
            if p.returncode != 0:
                raise SystemExit(f"accel sparse-allreduce failed: {e.strip()[-400:]}")
            out.append(json.loads(o.strip().splitlines()[-1]))
    return (max(s["median_step_s"] for s in out), statistics.median(s["bytes_sent_per_step"] for s in out),
            out[0]["pairs_in_sum_per_step"], statistics.median(s.get("cpu_s_per_step", float("nan")) for s in out))


def perftest_mib_per_s(a, size_bytes):
    port = free_port()
    env = dict(os.environ, UCX_TLS=a.tls)
    n = max(50, (256 << 20) // size_bytes)
    server = subprocess.Popen(["ucx_perftest", "-p", str(port), "-e"], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    try:
        r = subprocess.run(["ucx_perftest", "127.0.0.1", "-p", str(port), "-e", "-t", "ucp_am_bw", "-s",
                            str(size_bytes), "-n", str(n), "-w", str(max(1, n // 8)), "-f"], env=env,
                           capture_output=True, text=True, timeout=300)
    finally:
        server.wait(timeout=30)
    bw = None
    for line in r.stdout.splitlines():
        f = line.split()
        if len(f) >= 8 and f[0].isdigit():
            bw = float(f[5])  # overall MB/s (2^20 bytes)
    if bw is None:
        raise SystemExit("ucx_perftest printed no bandwidth: " + r.stderr[-400:])
    return bw


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--size", type=int, default=4)
    p.add_argument("--n", type=int, default=25000000)
    p.add_argument("--ratio", type=float, default=0.001)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--tls", default="tcp")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--overlap", type=float, default=0.0)
    p.add_argument("--exchanges", default="allgather,reduce-scatter")
    p.add_argument("--accel", default=str(REPO / "build" / "bin" / "accel"))
    a = p.parse_args()
    pairs = int(a.ratio * a.n)
    message = 8 * pairs + 64  # one contribution
    exchanges = a.exchanges.split(",")
    runs = {e: ([], [], [], []) for e in exchanges}
    bws = []
    for _ in range(a.repeat):
        bws.append(perftest_mib_per_s(a, message))
        for e in exchanges:
            for got, value in zip(runs[e], accel_run(a, e)):
                got.append(value)
    bw = statistics.median(bws)
    print(f"{a.size} members on loopback (UCX_TLS={a.tls}), {pairs} pairs ({message / 1024:.0f} KiB) each a step, "
          f"n = {a.n}, overlap {a.overlap}; union {statistics.median(runs[exchanges[0]][2]):.0f} pairs; "
          f"medians of {a.repeat}")
    print(f"  ucx_perftest ucp_am_bw, {message / 1024:.0f} KiB messages: {bw:.0f} MiB/s "
          f"(runs: {', '.join(f'{x:.0f}' for x in bws)} MiB/s)")
    for e in exchanges:
        steps, sent, _, cpu = runs[e]
        step, bytes_sent = statistics.median(steps), statistics.median(sent)
        wire = bytes_sent / (bw * 1048576)
        print(f"  {e:15s} median step {step * 1e3:6.2f} ms (runs: {', '.join(f'{x * 1e3:.2f}' for x in steps)}), "
              f"{bytes_sent / 1024:6.0f} KiB sent a member -> {wire * 1e3:.2f} ms on the wire; "
              f"step / transfer = {step / wire:.2f} (target <= 8)")
        # With more members than cores, a step waits for the others' CPU
        # too: a member's own CPU time a step is what it would take alone.
        c = statistics.median(cpu)
        print(f"  {'':15s} a member's CPU a step {c * 1e3:6.2f} ms ({os.cpu_count()} cores for {a.size} members); "
              f"CPU / transfer = {c / wire:.2f}")


if __name__ == "__main__":
    main()
