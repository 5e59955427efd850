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

from . import BucketSparsifier


class SparseHookState:
    def __init__(self, group, ratio=0.001, method="ldte-hist", momentum=0.0, masking=True, warmup=False,
                 per_layer=True, dense_below=0):
        """One BucketSparsifier per DDP bucket: per-layer selection inside
        the bucket, the small layers in one launch. dense_below: layers of
        fewer values are sent whole every step (deep gradient compression,
        Lin et al., 2018, leaves such tensors uncompressed: at 0.1% a
        512-value bias would send one value a step). With momentum
        correction they send their velocity, so they train as momentum SGD."""
        if dense_below < 0:
            raise ValueError(f"accel sparse hook: dense_below {dense_below} < 0")
        self.group = group
        self.options = dict(ratio=ratio, method=method, momentum=momentum, masking=masking, warmup=warmup,
                            dense_below=int(dense_below))
        self.per_layer = per_layer
        self.epoch = 0
        self.iteration = 0  # allreduce calls so far: the tag of the next
        self.bytes_sent = 0
        self.pairs_sent = 0
        self._sparsifiers = {}  # (bucket index, layer sizes) -> BucketSparsifier

    def set_epoch(self, epoch):
        """Warm-up (if on) follows the epoch: ratio 25%, 6.25%, ... down to `ratio`."""
        self.epoch = epoch
        for s in self._sparsifiers.values():
            s.set_epoch(epoch)

    def sparsifier_ratio(self):
        """This epoch's selection ratio (warm-up applied)."""
        for s in self._sparsifiers.values():
            return s.ratio
        return self.options["ratio"]

    def sparsifier(self, bucket):
        sizes = tuple(int(g.numel()) for g in bucket.gradients()) if self.per_layer else (int(bucket.buffer().numel()),)
        key = (bucket.index(), sizes)
        if key not in self._sparsifiers:
            # DDP rebuilds its buckets after the first iteration: a bucket
            # index with other layers replaces the old sparsifier (and its
            # residual, whose offsets no longer mean the same layers).
            for old in [k for k in self._sparsifiers if k[0] == key[0]]:
                del self._sparsifiers[old]
            s = BucketSparsifier(sizes, **self.options)
            s.set_epoch(self.epoch)
            self._sparsifiers[key] = s
        return self._sparsifiers[key]


def sparse_allreduce_hook(state, bucket):
    buffer = bucket.buffer()
    flat = buffer.detach()
    if flat.dtype != torch.float32 or flat.device.type != "cpu":
        raise TypeError(f"accel sparse hook: bucket of {flat.dtype} on {flat.device}; expected float32 on the CPU")
    view = flat.numpy()  # the bucket's memory, no copy
    idx, val = state.sparsifier(bucket).step(view)
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
