#!/usr/bin/env python3
"""Issue 31's accuracy check: does accel's sparse gradient exchange train a
small model as well as a dense allreduce and PowerSGD?

A 2-layer MLP (784-256-10, ReLU) learns Fashion-MNIST by data-parallel SGD
(lr 0.05, batch 64 per rank, 5 epochs) on 2 ranks, each training on its own
half of the 60,000 images (reshuffled every epoch from a fixed seed), with
DistributedDataParallel over gloo on 127.0.0.1. The methods, one run each:

  dense     DDP's own allreduce; SGD momentum 0.9
  powersgd  PyTorch's PowerSGD hook, rank 4; SGD momentum 0.9
  readme    accel's hook set up by hand as the old README said
            (SparseHookState(SparseGroup(...), ratio=R)); SGD momentum 0.9
            stays in the optimizer, the hook has none
  sparsify  accel.torch.sparsify(model, SGD(momentum=0.9), ratio=R): the
            momentum moves into the hook (momentum correction), masking,
            the ratio's values picked over the whole bucket
  sparsify-layer  the same with per_layer=True: the ratio of every layer,
            layers under 1000 values sent whole (sparsify's old default)
  sparsify-warmup  sparsify with warmup=True: the ratio 25%, 6.25%, ...
            by epoch (state.set_epoch(epoch)), R from the fifth epoch
  sparsify-warmup-iter  the same schedule iteration by iteration and four
            times as fast: state.set_epoch(4 * fractional epoch), R from
            the end of the first epoch

The accel methods run at each --ratios value. Reported: test accuracy on
the 10,000 test images after every epoch; bytes sent per step per rank,
averaged over the run and over the last epoch (sparsify's warm-up sends
more in the first epochs); the wall time of the run. Bytes: accel counts
its own (state.bytes_sent / steps); dense is 4 x the parameters; PowerSGD
is estimated as 4 bytes x rank 4 x (rows + cols) per weight matrix plus
the biases whole (and its first 2 steps, dense, are left out).

    PYTHONPATH=build/python /usr/bin/python3 scripts/bench_sparse_mlp.py \\
        [--methods dense powersgd readme sparsify] [--ratios 0.001 0.01] [--epochs 5] [--out results.json]

Each run starts its 2 rank processes itself (no torchrun: Debian's torch
1.13 on Python 3.11), one thread each, and is killed after --timeout s.
"""
import argparse
import gzip
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

DATA = Path("/usr/share/datasets/fashion-mnist")
METHODS = ["dense", "powersgd", "readme", "sparsify", "sparsify-layer", "sparsify-warmup", "sparsify-warmup-iter"]
ACCEL_METHODS = ("readme", "sparsify", "sparsify-layer", "sparsify-warmup", "sparsify-warmup-iter")
SIZE = 2
BATCH = 64
LR = 0.05
MOMENTUM = 0.9


# --- one rank ----------------------------------------------------------------

def read_idx(path):
    """An IDX file (gzip) as a uint8 array of its own shape."""
    import numpy as np

    raw = gzip.open(path, "rb").read()
    dims = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(prefix):
    """Images (flattened, scaled to [0, 1]) and labels as tensors."""
    import numpy as np
    import torch

    x = read_idx(DATA / f"{prefix}-images-idx3-ubyte.gz").reshape(-1, 28 * 28).astype(np.float32) / 255.0
    y = read_idx(DATA / f"{prefix}-labels-idx1-ubyte.gz").astype(np.int64)
    return torch.from_numpy(x), torch.from_numpy(y)


def build_model():
    import torch.nn as nn

    return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))


def powersgd_bytes(net):
    """PowerSGD's bytes a step, estimated: a rank-4 matrix W (rows x cols)
    goes as P (rows x 4) and Q (cols x 4) in float32; 1-D tensors whole."""
    total = 0
    for p in net.parameters():
        if p.dim() == 2:
            total += 4 * 4 * (p.shape[0] + p.shape[1])
        else:
            total += 4 * p.numel()
    return total


def attach_exchange(a, ddp):
    """Registers the method's gradient exchange on the DDP model and returns
    (optimizer, hook state or None, accel group or None)."""
    import torch

    params = ddp.parameters()
    if a.method == "dense":
        return torch.optim.SGD(params, lr=LR, momentum=MOMENTUM), None, None
    if a.method == "powersgd":
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as ps

        state = ps.PowerSGDState(process_group=None, matrix_approximation_rank=4, start_powerSGD_iter=2)
        ddp.register_comm_hook(state, ps.powerSGD_hook)
        return torch.optim.SGD(params, lr=LR, momentum=MOMENTUM), state, None
    import accel
    import accel.torch

    if a.method == "readme":
        # Exactly the old README's set-up: the hook's defaults (no momentum
        # correction, no warm-up, every layer sparsified), momentum in SGD.
        from accel.torch import SparseHookState, sparse_allreduce_hook

        group = accel.SparseGroup(rank=a.rank, size=SIZE, coordinator=f"127.0.0.1:{a.accel_port}")
        state = SparseHookState(group, ratio=a.ratio)
        ddp.register_comm_hook(state, sparse_allreduce_hook)
        return torch.optim.SGD(params, lr=LR, momentum=MOMENTUM), state, group
    # sparsify: its group comes from SparseGroup.from_torch() over DDP's group.
    opt = torch.optim.SGD(params, lr=LR, momentum=MOMENTUM)
    state = accel.torch.sparsify(ddp, opt, ratio=a.ratio, per_layer=a.method == "sparsify-layer",
                                 warmup=a.method.startswith("sparsify-warmup"))
    return opt, state, state.group


def accuracy(net, tx, ty):
    import torch

    with torch.no_grad():
        return (net(tx).argmax(dim=1) == ty).float().mean().item()


def rank_main(a):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    x, y = load("train")
    tx, ty = load("t10k")
    half = len(x) // SIZE
    shard = torch.arange(a.rank * half, (a.rank + 1) * half)  # this rank's own half

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(a.gloo_port))
    dist.init_process_group("gloo", rank=a.rank, world_size=SIZE)
    torch.manual_seed(0)  # the same initial model for every method
    net = build_model()
    # The 203,530 parameters (814 KB) fit DDP's first 1 MiB bucket: one
    # bucket, one exchange a step, for every method.
    ddp = torch.nn.parallel.DistributedDataParallel(net)
    opt, state, group = attach_exchange(a, ddp)

    g = torch.Generator().manual_seed(1 + a.rank)  # fixed seed, a new order every epoch
    ratio = a.ratio if a.method in ACCEL_METHODS else None
    steps, accs, epoch_bytes, epoch_steps, t0 = 0, [], [], [], time.perf_counter()
    for epoch in range(a.epochs):
        if a.method.startswith("sparsify"):
            state.set_epoch(epoch)
        order = shard[torch.randperm(len(shard), generator=g)]
        # Whole batches only: both ranks then take the same number of steps.
        for i in range(0, len(order) - BATCH + 1, BATCH):
            if a.method == "sparsify-warmup-iter":
                state.set_epoch(4 * (epoch + i / len(order)))
            idx = order[i:i + BATCH]
            loss = torch.nn.functional.cross_entropy(ddp(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            steps += 1
        accs.append(accuracy(net, tx, ty))
        if a.method in ACCEL_METHODS:
            # The warm-up sends far more in the first epochs: the last
            # epoch's rate is the steady one.
            epoch_bytes.append(state.bytes_sent - sum(epoch_bytes))
            epoch_steps.append(steps - sum(epoch_steps))
        if a.rank == 0:
            print(json.dumps({"method": a.method, "ratio": ratio, "epoch": epoch + 1, "accuracy": accs[-1],
                              "loss": loss.item(), "s": round(time.perf_counter() - t0, 1)}), flush=True)

    # Every method should leave the ranks with the same model; say if not.
    flat = torch.cat([p.detach().reshape(-1) for p in net.parameters()])
    other = [torch.zeros_like(flat) for _ in range(SIZE)]
    dist.all_gather(other, flat)
    max_diff = max((o - other[0]).abs().max().item() for o in other)

    if a.method in ACCEL_METHODS:
        bytes_per_step, last_bytes = state.bytes_sent / steps, epoch_bytes[-1] / epoch_steps[-1]
    else:  # not counted: what the method sends by construction, every step
        bytes_per_step = last_bytes = powersgd_bytes(net) if a.method == "powersgd" else 4 * flat.numel()
    if group is not None:
        group.close()
    dist.barrier()
    dist.destroy_process_group()
    if a.rank == 0:
        Path(a.result).write_text(json.dumps({
            "method": a.method, "ratio": ratio, "accuracy": accs, "final": accs[-1],
            "bytes_per_step": bytes_per_step, "last_epoch_bytes_per_step": last_bytes,
            "bytes_counted": a.method in ACCEL_METHODS, "steps": steps, "rank_max_param_diff": max_diff,
            "last_epoch_ratio": state.sparsifier_ratio() if a.method in ACCEL_METHODS else None}))


# --- the orchestrator -------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_one(method, ratio, a, tmp):
    """Starts the 2 ranks of one run, waits (killing both after
    a.timeout s) and returns rank 0's result dict, or one with an error."""
    result = Path(tmp) / f"{method}-{ratio}.json"
    result.unlink(missing_ok=True)
    gloo, coord = free_port(), free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1")
    procs = []
    for r in range(SIZE):
        cmd = [sys.executable, __file__, "--rank", str(r), "--method", method, "--ratio", str(ratio),
               "--epochs", str(a.epochs), "--gloo-port", str(gloo), "--accel-port", str(coord),
               "--result", str(result)]
        procs.append(subprocess.Popen(cmd, env=env, stdout=None if r == 0 else subprocess.DEVNULL))
    t0 = time.time()
    deadline = t0 + a.timeout
    error = None
    for p in procs:
        try:
            rc = p.wait(timeout=max(1, deadline - time.time()))
            if rc != 0 and error is None:
                error = f"rank exited {rc}"
        except subprocess.TimeoutExpired:
            error = f"timed out after {a.timeout} s"
            break
    for p in procs:  # a rank whose peer died would wait for it forever
        if p.poll() is None:
            p.kill()
            p.wait()
    wall = time.time() - t0
    if error is None and result.exists():
        out = json.loads(result.read_text())
    else:
        out = {"method": method, "ratio": ratio if method in ACCEL_METHODS else None, "error": error or "no result"}
    out["wall_s"] = round(wall, 1)
    return out


def table(results):
    lines = [f"{'method':<9} {'ratio':>6}  {'accuracy after each epoch (%)':<36} {'final':>6} "
             f"{'bytes/step':>10} {'last epoch':>10} {'wall s':>7}"]
    for r in results:
        ratio = "-" if r.get("ratio") is None else f"{r['ratio']:g}"
        if "error" in r:
            lines.append(f"{r['method']:<9} {ratio:>6}  {'ERROR: ' + r['error']:<36} {'':>6} {'':>10} {'':>10} "
                         f"{r['wall_s']:>7.0f}")
            continue
        epochs = " ".join(f"{100 * v:.2f}" for v in r["accuracy"])
        approx = "~" if r["method"] == "powersgd" else ""
        lines.append(f"{r['method']:<9} {ratio:>6}  {epochs:<36} {100 * r['final']:>6.2f} "
                     f"{approx + format(round(r['bytes_per_step']), ','):>10} "
                     f"{approx + format(round(r['last_epoch_bytes_per_step']), ','):>10} {r['wall_s']:>7.0f}")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--methods", nargs="+", choices=METHODS, default=METHODS)
    p.add_argument("--ratios", nargs="+", type=float, default=[0.001, 0.01], help="for readme and sparsify")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--out", help="write the results as JSON here")
    p.add_argument("--timeout", type=float, default=1200, help="seconds per run")
    # one rank (started by the orchestrator)
    p.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    p.add_argument("--method", help=argparse.SUPPRESS)
    p.add_argument("--ratio", type=float, help=argparse.SUPPRESS)
    p.add_argument("--gloo-port", type=int, help=argparse.SUPPRESS)
    p.add_argument("--accel-port", type=int, help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.rank is not None:
        return rank_main(a)

    import tempfile

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for method in a.methods:
            for ratio in (a.ratios if method in ACCEL_METHODS else [1.0]):
                results.append(run_one(method, ratio, a, tmp))
                print(table(results[-1:]).splitlines()[1], flush=True)
                if a.out:  # after every run, so a cut-short sweep keeps what it measured
                    Path(a.out).write_text(json.dumps(results, indent=1))
    print()
    print(table(results))


if __name__ == "__main__":
    main()
