"""One rank of the DDP hook test (run by test_sparse_python.py): trains a
small MLP on seeded synthetic data for a few steps with DistributedDataParallel
(gloo for DDP's own set-up), the gradients exchanged by accel's sparse hook
(--ratio) or by DDP's dense allreduce (--dense), and saves its parameters
and losses to OUT/rank-R.npz. --group env or torch: started by torchrun,
the ranks and addresses from its environment, the accel group from that
environment (SparseGroup()) or from the torch process group
(SparseGroup.from_torch())."""
import argparse
import os

import numpy as np
import torch
import torch.distributed as dist

import accel
from accel.torch import SparseHookState, sparse_allreduce_hook, sparsify


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rank", type=int)
    p.add_argument("--size", type=int)
    p.add_argument("--gloo-port", type=int)
    p.add_argument("--accel-port", type=int)
    p.add_argument("--group", choices=["args", "env", "torch"], default="args")
    p.add_argument("--momentum", type=float, default=0.0, help="SGD's momentum")
    p.add_argument("--sparsify", action="store_true", help="accel.torch.sparsify() sets up hook and optimizer")
    p.add_argument("--ratio", type=float, default=0.01)
    p.add_argument("--dense", action="store_true")
    p.add_argument("--blocking", action="store_true", help="the hook exchanges inside the call (overlap=False)")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    if a.group == "args":
        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(a.gloo_port)
    else:  # torchrun's environment
        a.rank, a.size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=a.rank, world_size=a.size)
    net = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    model = torch.nn.parallel.DistributedDataParallel(net, bucket_cap_mb=0.01)  # several buckets
    group = None
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=a.momentum)
    if a.sparsify:
        # Without masking: masking clears the velocity of what was sent,
        # which at ratio 1 is all of it.
        state = sparsify(model, opt, ratio=a.ratio, warmup=False, dense_below=0, masking=False, timeout_ms=20000,
                         overlap=not a.blocking)
        group = state.group
    elif not a.dense:
        if a.group == "args":
            group = accel.SparseGroup(rank=a.rank, size=a.size, coordinator=f"127.0.0.1:{a.accel_port}",
                                      timeout_ms=20000)
        elif a.group == "env":
            group = accel.SparseGroup(timeout_ms=20000)
        else:
            group = accel.SparseGroup.from_torch(timeout_ms=20000)
        assert (group.rank, group.size) == (a.rank, a.size)
        state = SparseHookState(group, ratio=a.ratio, overlap=not a.blocking)
        model.register_comm_hook(state, sparse_allreduce_hook)
    g = torch.Generator().manual_seed(100 + a.rank)  # each rank its own data
    w = torch.randn(32, 4, generator=torch.Generator().manual_seed(7))
    losses = []
    for _ in range(a.steps):
        x = torch.randn(64, 32, generator=g)
        y = (x @ w).argmax(dim=1)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    params = np.concatenate([q.detach().numpy().ravel() for q in net.parameters()])
    np.savez(os.path.join(a.out, f"rank-{a.rank}.npz"), params=params, losses=np.array(losses))
    if group is not None:
        group.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
