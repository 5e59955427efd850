"""The DDP hook on CUDA tensors, 2 ranks (scripts/device_check.sh).

Two phases, each a pair of processes on this machine:
  equal  each rank feeds the same seeded gradient buckets to two hook
         states, one with the buckets on the CPU and one with them on
         --device; every step's averaged result and the residuals must agree
         within float rounding.
  ddp    DistributedDataParallel (gloo for DDP's own set-up) trains a small
         MLP on --device with the hook for 20 steps; the ranks must end with
         the same parameters, and the loss must fall.
Writes one JSON object (--out); exits 1 when a phase fails.

  python3 ddp_hook.py --device cuda --out ddp.json
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile

import numpy as np


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Bucket:
    """What the hook reads of DDP's GradBucket: its flat buffer, the layers'
    views of it, and its index."""

    def __init__(self, index, flat, sizes):
        self._index, self._flat, self._sizes = index, flat, sizes

    def index(self):
        return self._index

    def buffer(self):
        return self._flat

    def gradients(self):
        return list(self._flat.split(self._sizes))


def phase_equal(a, torch, accel, hook):
    sizes = [3000, 70000, 300, 100000]  # below and above the hook's host_below split
    group = accel.SparseGroup(rank=a.rank, size=a.size, coordinator=f"127.0.0.1:{a.port}", timeout_ms=30000)
    host_state = hook.SparseHookState(group, ratio=0.01)
    dev_state = hook.SparseHookState(group, ratio=0.01)
    worst = 0.0
    tag = 0
    for step in range(8):
        g = torch.Generator().manual_seed(1000 * step + a.rank)
        grad = torch.randn(sum(sizes), generator=g) * torch.linspace(0.1, 2.0, sum(sizes))
        outs = []
        for state, flat in ((host_state, grad.clone()), (dev_state, grad.clone().to(a.device))):
            state.iteration = tag  # one group, one sequence of tags for both states
            tag += 1
            outs.append(hook.sparse_allreduce_hook(state, Bucket(0, flat, sizes)).wait())
        host, dev = outs[0], outs[1].cpu()
        worst = max(worst, float((host - dev).abs().max()))
    residual_diff = max(float(np.abs(hs.residual - ds.residual).max())
                        for hs, ds in zip(host_state._sparsifiers.values(), dev_state._sparsifiers.values()))
    selection = dev_state.selection_device(grad.to(a.device))
    group.close()
    return {"steps": 8, "values": sum(sizes), "max_abs_difference": worst, "residual_max_abs_difference": residual_diff,
            "selection_device": selection}


def phase_ddp(a, torch, accel, hook):
    import torch.distributed as dist
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(a.gloo_port)
    dist.init_process_group("gloo", rank=a.rank, world_size=a.size)
    torch.manual_seed(0)
    dev = torch.device(a.device)
    net = torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.ReLU(), torch.nn.Linear(256, 4)).to(dev)
    model = torch.nn.parallel.DistributedDataParallel(net, bucket_cap_mb=0.01)
    group = accel.SparseGroup(rank=a.rank, size=a.size, coordinator=f"127.0.0.1:{a.port}", timeout_ms=30000)
    state = hook.SparseHookState(group, ratio=0.05)
    model.register_comm_hook(state, hook.sparse_allreduce_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(100 + a.rank)
    w = torch.randn(32, 4, generator=torch.Generator().manual_seed(7))
    losses = []
    for _ in range(20):
        x = torch.randn(64, 32, generator=g)
        y = (x @ w).argmax(dim=1)
        loss = torch.nn.functional.cross_entropy(model(x.to(dev)), y.to(dev))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    params = np.concatenate([q.detach().cpu().numpy().ravel() for q in net.parameters()])
    group.close()
    dist.destroy_process_group()
    return {"losses": losses, "params": params.tolist(), "buckets": len(state._sparsifiers),
            "bytes_sent": state.bytes_sent}


def rank_main(a):
    import torch
    import accel
    import accel.torch as hook
    result = (phase_equal if a.phase == "equal" else phase_ddp)(a, torch, accel, hook)
    with open(os.path.join(a.tmp, f"{a.phase}-{a.rank}.json"), "w") as f:
        json.dump(result, f)


def run_phase(a, phase, tmp):
    port, gloo = free_port(), free_port()
    procs = [subprocess.Popen([sys.executable, __file__, "--phase", phase, "--rank", str(r), "--size", "2",
                               "--device", a.device, "--port", str(port), "--gloo-port", str(gloo), "--tmp", tmp])
             for r in range(2)]
    codes = []
    for p in procs:
        try:
            codes.append(p.wait(timeout=a.timeout))
        except subprocess.TimeoutExpired:
            p.kill()
            codes.append("timeout")
    if codes != [0, 0]:
        return None, f"{phase}: ranks exited {codes}"
    return [json.load(open(os.path.join(tmp, f"{phase}-{r}.json"))) for r in range(2)], None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda")
    p.add_argument("--out")
    p.add_argument("--timeout", type=float, default=50)
    p.add_argument("--phase")
    p.add_argument("--rank", type=int)
    p.add_argument("--size", type=int)
    p.add_argument("--port", type=int)
    p.add_argument("--gloo-port", type=int)
    p.add_argument("--tmp")
    a = p.parse_args()
    if a.phase:
        return rank_main(a)
    out = {"device": a.device, "failures": []}
    with tempfile.TemporaryDirectory() as tmp:
        eq, err = run_phase(a, "equal", tmp)
        if err:
            out["failures"].append(err)
        else:
            out["equal"] = eq[0] | {"ranks_agree": eq[0]["max_abs_difference"] == eq[1]["max_abs_difference"]}
            if max(e["max_abs_difference"] for e in eq) > 1e-6 or max(e["residual_max_abs_difference"] for e in eq) > 1e-6:
                out["failures"].append("equal: the device path's results differ from the CPU path's")
        ddp, err = run_phase(a, "ddp", tmp)
        if err:
            out["failures"].append(err)
        else:
            same = ddp[0]["params"] == ddp[1]["params"]
            losses = ddp[0]["losses"]
            out["ddp"] = {"steps": len(losses), "first_loss": losses[0], "last_loss": losses[-1],
                          "ranks_same_parameters": same, "buckets": ddp[0]["buckets"],
                          "bytes_sent": ddp[0]["bytes_sent"]}
            if not same:
                out["failures"].append("ddp: the ranks ended with different parameters")
            if not losses[-1] < losses[0]:
                out["failures"].append("ddp: the loss did not fall")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(out, f, indent=1)
    print(json.dumps(out))
    return 1 if out["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
