"""A PyTorch DDP communication hook that exchanges sparsified gradients
through accel's sparse allreduce instead of a dense allreduce (residual
gradient compression: each member sends only the top `ratio` of its
accumulated gradient, per layer, and keeps the rest as its residual).

    import torch.distributed as dist
    from accel.torch import SparseHookState, sparse_allreduce_hook
    dist.init_process_group("gloo", ...)               # DDP's own set-up
    model = torch.nn.parallel.DistributedDataParallel(net)
    state = SparseHookState(accel.SparseGroup(rank=r, size=p, coordinator="host:port"), ratio=0.001)
    model.register_comm_hook(state, sparse_allreduce_hook)

Every member applies the same averaged sparse gradient (the sum is merged
in member order, so it is bitwise the same everywhere). A member that dies
is left out of the steps after it (its residual is lost with it); the
average divides by the members actually counted.
"""
import numpy as np
import torch

from . import Sparsifier


class SparseHookState:
    def __init__(self, group, ratio=0.001, method="ldte-hist", momentum=0.0, masking=True, warmup=False,
                 per_layer=True):
        self.group = group
        self.options = dict(ratio=ratio, method=method, momentum=momentum, masking=masking, warmup=warmup)
        self.per_layer = per_layer
        self.epoch = 0
        self.iteration = 0  # allreduce calls so far: the tag of the next
        self.bytes_sent = 0
        self.pairs_sent = 0
        self._sparsifiers = {}  # (bucket index, layer sizes) -> [(offset, size, Sparsifier)]

    def set_epoch(self, epoch):
        """Warm-up (if on) follows the epoch: ratio 25%, 6.25%, ... down to `ratio`."""
        self.epoch = epoch
        for layers in self._sparsifiers.values():
            for _, _, s in layers:
                s.set_epoch(epoch)

    def sparsifier_ratio(self):
        """This epoch's selection ratio (warm-up applied)."""
        for layers in self._sparsifiers.values():
            return layers[0][2].ratio
        return self.options["ratio"]

    def layers(self, bucket):
        sizes = tuple(int(g.numel()) for g in bucket.gradients()) if self.per_layer else (int(bucket.buffer().numel()),)
        key = (bucket.index(), sizes)
        if key not in self._sparsifiers:  # DDP rebuilds its buckets after the first iteration
            layers, offset = [], 0
            for n in sizes:
                s = Sparsifier(n, **self.options)
                s.set_epoch(self.epoch)
                layers.append((offset, n, s))
                offset += n
            self._sparsifiers[key] = layers
        return self._sparsifiers[key]


def sparse_allreduce_hook(state, bucket):
    buffer = bucket.buffer()
    flat = buffer.detach()
    if flat.dtype != torch.float32 or flat.device.type != "cpu":
        raise TypeError(f"accel sparse hook: bucket of {flat.dtype} on {flat.device}; expected float32 on the CPU")
    view = flat.numpy()  # the bucket's memory, no copy
    idx_parts, val_parts = [], []
    for offset, n, s in state.layers(bucket):
        i, v = s.step(view[offset:offset + n])
        idx_parts.append(i + offset)
        val_parts.append(v)
    idx = np.concatenate(idx_parts) if idx_parts else np.zeros(0, np.int64)
    val = np.concatenate(val_parts) if val_parts else np.zeros(0, np.float32)
    result = state.group.allreduce(view.size, idx, val, tag=state.iteration)
    state.iteration += 1
    state.bytes_sent += result["bytes_sent"]
    state.pairs_sent += int(idx.size)
    out = torch.zeros_like(flat)
    if result["indices"].size:
        sums = torch.from_numpy(result["values"]) / float(len(result["members"]))
        out[torch.from_numpy(result["indices"].astype(np.int64))] = sums
    fut = torch.futures.Future()
    fut.set_result(out)
    return fut
