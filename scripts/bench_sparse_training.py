#!/usr/bin/env python3
"""The gradient-sparsification experiment (Chen et al., "Gradient
sparsification compression approach to reducing communication in distributed
training", 2021): data-parallel training of a small CNN on Fashion-MNIST by 4
workers, each in its own network namespace behind a link shaped with tc tbf
(--rates, Mbit/s), comparing the gradient exchange of

  dense       DDP's allreduce (gloo)
  powersgd    PyTorch's PowerSGD hook, rank 4 (error feedback, warm start)
  ldte-hist   accel's sparse hook, top 0.1% per layer by ldte-hist
  exact       accel's sparse hook, top 0.1% per layer, exact threshold
  ldte-hist-warmup  (with --methods) ldte-hist after the warm-up of deep
              gradient compression (Lin et al., 2018): 25%, 6.25%, 1.56%,
              0.39% in the first four epochs, then 0.1%
  ldte-hist-blocking  (with --methods) ldte-hist with the exchange inside
              the hook (overlap=False) instead of beside the backward pass;
              with --bucket-kb, the overlap's own gain
  ldte-hist-bucket  (with --methods) top 0.1% of each DDP bucket as a
              whole (per_layer=False, accel.torch.sparsify()'s default)

For each: time per iteration (median), bytes sent per iteration (each
namespace's interface counters, so every method is counted on the wire the
same way), and test accuracy after every epoch; a PNG of accuracy against
training time and a table of ratios against dense. By default 60000 images
(15000 a worker), 5 epochs, a cosine learning rate, and the accel methods
send layers under 1000 values whole (--dense-below). The --timing-rates
(default 100 Mbit/s) run --timing-iters iterations only: the computation
is the same at any link rate, so their accuracy is the full runs' (dense
training at 100 Mbit/s would take most of an hour). Needs root
(namespaces, tc).

    python3 scripts/bench_sparse_training.py [--rates 100 1000] [--epochs 5] [--methods ...]

The ranks run with Debian's python3 (torch 1.13, CPU, gloo) and the accel
module from build/python; the plot needs matplotlib in the orchestrator's
interpreter (the benchmark venv, or Debian's python3-matplotlib).
"""
import argparse
import gzip
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(os.environ.get("ACCEL_REPO", Path(__file__).resolve().parent.parent))
DATA = Path("/usr/share/datasets/fashion-mnist")
METHODS = ["dense", "powersgd", "ldte-hist", "exact", "ldte-hist-warmup", "ldte-hist-blocking", "ldte-hist-bucket"]
SUBNET = "10.78.0"


# --- one rank ----------------------------------------------------------------

def read_idx(path):
    import numpy as np

    raw = gzip.open(path, "rb").read()
    dims = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def model():
    import torch.nn as nn

    # The fully connected layer holds most of the ~0.85M parameters: the
    # exchange, not the convolutions, is what a slow link makes expensive.
    return nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64 * 5 * 5, 512), nn.ReLU(), nn.Linear(512, 10))


def tx_bytes(iface):
    return int(Path(f"/sys/class/net/{iface}/statistics/tx_bytes").read_text())


def rank_main(a):
    import numpy as np
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    torch.manual_seed(0)
    x = torch.from_numpy(read_idx(DATA / "train-images-idx3-ubyte.gz")[:a.train].astype(np.float32) / 255.0)
    y = torch.from_numpy(read_idx(DATA / "train-labels-idx1-ubyte.gz")[:a.train].astype(np.int64))
    tx = torch.from_numpy(read_idx(DATA / "t10k-images-idx3-ubyte.gz")[:a.test].astype(np.float32) / 255.0)
    ty = torch.from_numpy(read_idx(DATA / "t10k-labels-idx1-ubyte.gz")[:a.test].astype(np.int64))
    x, tx = x.unsqueeze(1), tx.unsqueeze(1)
    shard = torch.arange(a.rank, a.train, a.size)  # each rank its own samples

    os.environ.update(MASTER_ADDR=a.master, MASTER_PORT=str(a.gloo_port), GLOO_SOCKET_IFNAME=a.iface)
    dist.init_process_group("gloo", rank=a.rank, world_size=a.size)
    net = model()
    # One gradient bucket for every method: PowerSGD's chained async
    # allreduces over several gloo buckets were issued in different orders
    # on different ranks (gloo: "op.preamble.length <= op.nbytes").
    # --bucket-kb (the accel methods): buckets of that size instead, so that
    # the exchange of the layers backward reaches first overlaps the rest.
    accel_method = a.method in ("ldte-hist", "exact", "ldte-hist-warmup", "ldte-hist-blocking", "ldte-hist-bucket")
    if a.bucket_kb and accel_method:
        dist._DEFAULT_FIRST_BUCKET_BYTES = a.bucket_kb << 10
        ddp = torch.nn.parallel.DistributedDataParallel(net, bucket_cap_mb=a.bucket_kb / 1024)
    else:
        dist._DEFAULT_FIRST_BUCKET_BYTES = 64 << 20
        ddp = torch.nn.parallel.DistributedDataParallel(net, bucket_cap_mb=64)
    state = group = None
    if a.method == "powersgd":
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as ps

        state = ps.PowerSGDState(process_group=None, matrix_approximation_rank=4, start_powerSGD_iter=2,
                                 min_compression_rate=2, use_error_feedback=True, warm_start=True)
        ddp.register_comm_hook(state, ps.powerSGD_hook)
    elif accel_method:
        import accel
        from accel.torch import SparseHookState, sparse_allreduce_hook

        group = accel.SparseGroup(rank=a.rank, size=a.size, coordinator=f"{a.master}:{a.accel_port}",
                                  timeout_ms=60000, keepalive_ms=120000)
        warmup = a.method.endswith("-warmup")
        state = SparseHookState(group, ratio=a.ratio,
                                method=a.method.removesuffix("-warmup").removesuffix("-blocking").removesuffix(
                                    "-bucket"),
                                momentum=a.momentum_correction, masking=bool(a.masking), warmup=warmup,
                                dense_below=a.dense_below, overlap=not a.method.endswith("-blocking"),
                                per_layer=not a.method.endswith("-bucket"))
        ddp.register_comm_hook(state, sparse_allreduce_hook)
    # The same optimizer for every method: SGD with momentum on the
    # exchanged (averaged) gradient. With --momentum-correction the sparse
    # hook accumulates momentum locally instead (deep gradient compression)
    # and the optimizer has none; its momentum-factor masking zeroes the
    # momentum of every sent coordinate. Measured here (3 epochs, 0.1%):
    # correction 0.9 with masking 79.15%, the optimizer's momentum 77.15%.
    opt = torch.optim.SGD(ddp.parameters(), lr=a.lr,
                          momentum=0.0 if group is not None and a.momentum_correction > 0 else 0.9)
    g = torch.Generator().manual_seed(1)
    per_epoch = len(shard) // a.batch
    total_iters = max(1, a.epochs * per_epoch)

    def set_lr(it):
        # cosine: the rate decays to 0 over the run, so the last epoch's
        # accuracy is a settled one (at a constant rate it swings by 1-3
        # points between epochs here, dense included).
        lr = a.lr if a.schedule == "constant" else 0.5 * a.lr * (1 + math.cos(math.pi * it / total_iters))
        for pg in opt.param_groups:
            pg["lr"] = lr

    epochs = []
    for epoch in range(a.epochs):
        if group is not None:
            state.set_epoch(epoch)
        order = shard[torch.randperm(len(shard), generator=g)]
        times = []
        b0 = tx_bytes(a.iface)
        iters = 0
        for i in range(0, len(order) - a.batch + 1, a.batch):
            if a.max_iters and epoch * per_epoch + iters >= a.max_iters:
                break
            idx = order[i:i + a.batch]
            set_lr(epoch * per_epoch + iters)
            t0 = time.perf_counter()
            loss = torch.nn.functional.cross_entropy(ddp(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            times.append(time.perf_counter() - t0)
            iters += 1
        sent = tx_bytes(a.iface) - b0
        with torch.no_grad():
            acc = (net(tx).argmax(dim=1) == ty).float().mean().item()
        epochs.append({"epoch": epoch + 1, "accuracy": acc, "median_iteration_s": statistics.median(times),
                       "ratio": state.sparsifier_ratio() if group is not None else 1.0,
                       "bytes_per_iteration": sent / max(iters, 1), "iterations": iters, "loss": loss.item(),
                       "partial": iters < per_epoch})
        print(json.dumps({"rank": a.rank, **epochs[-1]}), flush=True)
        if iters < per_epoch:
            break
    if group is not None:
        group.close()
    dist.barrier()
    dist.destroy_process_group()
    if a.rank == 0:
        Path(a.out).write_text(json.dumps({"method": a.method, "epochs": epochs}))


# --- the orchestrator -------------------------------------------------------

def sh(*cmd, check=True):
    return subprocess.run(cmd, check=check, capture_output=True, text=True)


def namespaces_up(size, mbit):
    namespaces_down(size)
    sh("ip", "link", "add", "accel-tb", "type", "bridge")
    sh("ip", "link", "set", "accel-tb", "up")
    burst = max(64, mbit * 1000 // 8 // 100)  # kbit/s over HZ: at least one tick's worth, in KiB
    for r in range(size):
        ns, host, peer = f"accel-t{r}", f"accel-th{r}", f"accel-tn{r}"
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", host, "type", "veth", "peer", "name", peer)
        sh("ip", "link", "set", peer, "netns", ns)
        sh("ip", "link", "set", host, "master", "accel-tb", "up")
        sh("ip", "-n", ns, "addr", "add", f"{SUBNET}.{11 + r}/24", "dev", peer)
        sh("ip", "-n", ns, "link", "set", peer, "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        sh("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", peer, "root", "tbf", "rate", f"{mbit}mbit",
           "burst", f"{burst}kb", "latency", "50ms")


def namespaces_down(size):
    for r in range(size):
        sh("ip", "link", "del", f"accel-th{r}", check=False)
        sh("ip", "netns", "del", f"accel-t{r}", check=False)
    sh("ip", "link", "del", "accel-tb", check=False)


def run_method(a, method, mbit, out_dir, port):
    env = dict(os.environ, PYTHONPATH=str(REPO / "build" / "python"), OMP_NUM_THREADS="1", UCX_TLS="tcp")
    out = out_dir / f"{method}_{mbit}.json"
    procs = []
    for r in range(a.size):
        cmd = ["ip", "netns", "exec", f"accel-t{r}", "taskset", "-c", str(r % os.cpu_count()), a.python,
               str(Path(__file__).resolve()), "--rank", str(r), "--size", str(a.size), "--method", method,
               "--master", f"{SUBNET}.11", "--iface", f"accel-tn{r}", "--gloo-port", str(port),
               "--accel-port", str(port + 1), "--epochs", str(a.epochs), "--train", str(a.train), "--test",
               str(a.test), "--batch", str(a.batch), "--ratio", str(a.ratio), "--lr", str(a.lr),
               "--momentum-correction", str(a.momentum_correction), "--masking", str(a.masking),
               "--dense-below", str(a.dense_below), "--schedule", a.schedule, "--out", str(out),
               "--bucket-kb", str(a.bucket_kb),
               "--max-iters", str(a.timing_iters if mbit in a.timing_rates else 0)]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    ok = True
    for r, p in enumerate(procs):
        try:
            _, err = p.communicate(timeout=a.timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            err, ok = "timed out", False
        if p.returncode != 0:
            ok = False
            print(f"  {method} at {mbit} Mbit/s: rank {r} failed: {err.strip()[-600:]}", file=sys.stderr)
    for p in procs:
        if p.poll() is None:
            p.kill()
    return json.loads(out.read_text()) if ok and out.exists() else None


def orchestrate(a):
    if os.geteuid() != 0:
        sys.exit("bench_sparse_training: needs root (network namespaces, tc)")
    out_dir = REPO / "build" / "bench_sparse_training"
    out_dir.mkdir(parents=True, exist_ok=True)
    results = {}
    port = 29500
    try:
        for mbit in a.rates:
            namespaces_up(a.size, mbit)
            for method in a.methods:
                print(f"[{mbit} Mbit/s] {method} ...", file=sys.stderr, flush=True)
                port += 2
                results[(mbit, method)] = run_method(a, method, mbit, out_dir, port)
            namespaces_down(a.size)
    finally:
        namespaces_down(a.size)
    report(a, results, out_dir)


def report(a, results, out_dir):
    print(f"\n{a.size} workers, {a.train} training images ({a.train // a.size} each), batch {a.batch} a worker, "
          f"{a.epochs} epochs, top-k ratio {a.ratio}; test accuracy on {a.test} images")
    for mbit in a.rates:
        dense = results.get((mbit, "dense"))
        print(f"\n{mbit} Mbit/s per worker link")
        print(f"  {'method':16} {'s/iter':>8} {'x dense':>8} {'KB/iter':>9} {'last epoch s/iter':>17} "
              f"{'accuracy per epoch':>30}  vs dense")
        for method in a.methods:
            r = results.get((mbit, method))
            if r is None:
                print(f"  {method:16} failed")
                continue
            e = r["epochs"]
            it = statistics.median(x["median_iteration_s"] for x in e)
            kb = statistics.median(x["bytes_per_iteration"] for x in e) / 1024
            speed = (statistics.median(x["median_iteration_s"] for x in dense["epochs"]) / it) if dense else float("nan")
            acc = " ".join(f"{x['accuracy'] * 100:5.2f}" for x in e)
            gap = (e[-1]["accuracy"] - dense["epochs"][-1]["accuracy"]) * 100 if dense else float("nan")
            if e[-1].get("partial"):  # a timing run: the accuracy is the full runs'
                full = [m for m in a.rates if m not in a.timing_rates]
                fr, fd = (results.get((full[0], method)), results.get((full[0], "dense"))) if full else (None, None)
                acc = f"(timing: {sum(x['iterations'] for x in e)} iterations)"
                gap = ((fr["epochs"][-1]["accuracy"] - fd["epochs"][-1]["accuracy"]) * 100 if fr and fd
                       else float("nan"))
            last = e[-1]["median_iteration_s"]
            print(f"  {method:16} {it:8.4f} {speed:7.2f}x {kb:9.1f} {last:11.4f} ({e[-1]['bytes_per_iteration'] / 1024:.0f} KB)"
                  f" {acc:>30}  {gap:+.2f} pt")
    (out_dir / "results.json").write_text(json.dumps({f"{k[0]}:{k[1]}": v for k, v in results.items()}))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(no matplotlib: no plot; run with the benchmark venv)")
        return
    fig, axes = plt.subplots(1, len(a.rates), figsize=(6 * len(a.rates), 4), squeeze=False)
    full = [m for m in a.rates if m not in a.timing_rates]
    for ax, mbit in zip(axes[0], a.rates):
        timing = mbit in a.timing_rates
        for method in a.methods:
            r = results.get((mbit, method))
            # A timing rate's curve: the full run's accuracy per epoch, at
            # this rate's time per iteration (the computation is the same).
            acc_run = results.get((full[0], method)) if timing and full else r
            if not r or not acc_run:
                continue
            it = statistics.median(x["median_iteration_s"] for x in r["epochs"])
            t, xs, ys = 0.0, [], []
            for e in acc_run["epochs"]:
                t += (it if timing else e["median_iteration_s"]) * e["iterations"]
                xs.append(t)
                ys.append(e["accuracy"] * 100)
            ax.plot(xs, ys, marker="o", label=method)
        ax.set_title(f"{mbit} Mbit/s links, {a.size} workers" +
                     (f"\n(time measured here; accuracy of the {full[0]} Mbit/s runs)" if timing and full else ""))
        ax.set_xlabel("training time (s, median iteration x iterations)")
        ax.set_ylabel("test accuracy (%)")
        ax.legend()
    fig.tight_layout()
    png = out_dir / "bench_sparse_training.png"
    fig.savefig(png, dpi=100)
    print(f"\nplot: {png}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rates", type=int, nargs="+", default=[100, 1000], help="link rates, Mbit/s")
    p.add_argument("--methods", nargs="+", default=METHODS[:4], choices=METHODS)
    p.add_argument("--size", type=int, default=4)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--train", type=int, default=60000)
    p.add_argument("--test", type=int, default=10000)
    p.add_argument("--timing-rates", type=int, nargs="*", default=[100],
                   help="rates run for --timing-iters iterations only: time and bytes per iteration; the "
                        "accuracy is the same computation at any rate and comes from the full runs")
    p.add_argument("--timing-iters", type=int, default=200)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--ratio", type=float, default=0.001)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--schedule", choices=["constant", "cosine"], default="cosine",
                   help="learning rate over the run (the same for every method)")
    p.add_argument("--momentum-correction", type=float, default=0.9,
                   help="accel methods: local momentum correction (0: the optimizer's momentum, as dense)")
    p.add_argument("--masking", type=int, default=1, help="accel methods: momentum-factor masking (1 or 0)")
    p.add_argument("--dense-below", type=int, default=1000,
                   help="accel methods: layers of fewer elements are sent whole (0: every layer sparsified); "
                        "1000: the biases and the 288-weight first convolution (0.2%% of the values)")
    p.add_argument("--timeout", type=int, default=1800, help="per run, seconds")
    p.add_argument("--bucket-kb", type=int, default=0,
                   help="accel methods: DDP buckets of this many KiB (0: one bucket, as the other methods)")
    p.add_argument("--python", default="/usr/bin/python3", help="the ranks' interpreter (with torch)")
    # One rank (started by the orchestrator inside its namespace):
    p.add_argument("--rank", type=int)
    p.add_argument("--method", choices=METHODS)
    p.add_argument("--master")
    p.add_argument("--iface")
    p.add_argument("--gloo-port", type=int)
    p.add_argument("--accel-port", type=int)
    p.add_argument("--out")
    p.add_argument("--max-iters", type=int, default=0, help="stop after this many iterations (0: every epoch)")
    a = p.parse_args()
    if a.rank is not None:
        rank_main(a)
    else:
        orchestrate(a)


if __name__ == "__main__":
    main()
