"""A PyTorch DDP communication hook that exchanges sparsified gradients
through accel's sparse allreduce instead of a dense allreduce (residual
gradient compression: each member sends only the top `ratio` of its
accumulated gradient, per layer, and keeps the rest as its residual).

    model = torch.nn.parallel.DistributedDataParallel(net)
    state = accel.torch.sparsify(model, optimizer, ratio=0.001)   # hook and optimizer set up together

or, by hand:

    import torch.distributed as dist
    from accel.torch import SparseHookState, sparse_allreduce_hook
    dist.init_process_group("gloo", ...)               # DDP's own set-up
    model = torch.nn.parallel.DistributedDataParallel(net)
    state = SparseHookState(accel.SparseGroup(rank=r, size=p, coordinator="host:port"), ratio=0.001)
    model.register_comm_hook(state, sparse_allreduce_hook)

Every member applies the same averaged sparse gradient (the sum is merged
in member order, so it is bitwise the same everywhere).

The exchange overlaps the backward pass (overlap=True, the default): the
hook hands each bucket, as DDP makes it ready, to one thread of the
state's, which selects and exchanges the buckets one after another, in
order, while autograd computes the next; the hook's future completes when
its bucket's sum is in. overlap=False exchanges inside the hook (a
finished future), as before.

Buckets on a GPU (DDP on CUDA tensors) keep their residual on that GPU
(residual_on_device, the default): accumulation, selection (accel's CUDA
topk_histogram reads the residual where it is) and clearing run there,
and only the selected (index, value) pairs come to the host for the
exchange; the averaged result goes back to the bucket's device. With
residual_on_device=False the bucket is copied into pinned host memory each
step, the residual lives on the host and only the histogram passes run on
the GPU. A member that dies
is left out of the steps after it (its residual is lost with it); the
average divides by the members actually counted.
"""
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from . import BucketSparsifier
from .device_residual import TorchBucketSparsifier


class SparseHookState:
    def __init__(self, group, ratio=0.001, method="ldte-hist", momentum=0.0, masking=True, warmup=False,
                 per_layer=True, dense_below=0, device=None, residual_on_device=True, overlap=True):
        """One BucketSparsifier per DDP bucket: per-layer selection inside
        the bucket, the small layers in one launch. dense_below: layers of
        fewer values are sent whole every step (deep gradient compression,
        Lin et al., 2018, leaves such tensors uncompressed: at 0.1% a
        512-value bias would send one value a step). With momentum
        correction they send their velocity, so they train as momentum SGD.
        device: where the selection runs (an accel device spec such as
        "cpu" or "cuda:0"); None picks the bucket's own GPU when accel has
        it, else the cpu. residual_on_device: a GPU bucket's residual stays
        on its GPU (accel.device_residual.TorchBucketSparsifier).
        overlap: buckets are selected and exchanged on a thread of this
        state's, beside the backward pass (one bucket after another, in
        the order DDP hands them over: every member's steps stay in the
        same order); False: inside the hook."""
        if dense_below < 0:
            raise ValueError(f"accel sparse hook: dense_below {dense_below} < 0")
        self.group = group
        self.options = dict(ratio=ratio, method=method, momentum=momentum, masking=masking, warmup=warmup,
                            dense_below=int(dense_below))
        self.per_layer = per_layer
        self.device = device
        self.residual_on_device = residual_on_device
        self._pinned = {}  # bucket index -> pinned host copy of a GPU bucket
        self.epoch = 0
        self.iteration = 0  # allreduce calls so far: the tag of the next
        self.bytes_sent = 0
        self.pairs_sent = 0
        self._sparsifiers = {}  # (bucket index, layer sizes) -> BucketSparsifier
        self._layers = {}  # the same key -> {id(parameter): (offset, size)}
        self._retired = []  # (sparsifier, layout) of buckets DDP has just laid out anew
        self.overlap = bool(overlap)
        self._exchanger = None  # overlap: the one thread that exchanges buckets, made on first use

    def set_epoch(self, epoch):
        """Warm-up (if on) follows the epoch: ratio 25%, 6.25%, ... down to
        `ratio`; a fractional epoch (epoch + i / iterations per epoch)
        ramps it down iteration by iteration."""
        self.epoch = epoch
        for s in self._sparsifiers.values():
            s.set_epoch(epoch)

    def sparsifier_ratio(self):
        """This epoch's selection ratio (warm-up applied)."""
        for s in self._sparsifiers.values():
            return s.ratio
        return self.options["ratio"]

    def selection_device(self, tensor):
        """The accel device that selects for a bucket on `tensor`'s device."""
        if self.device is not None:
            return self.device
        if tensor.device.type == "cuda":
            name = f"cuda:{tensor.device.index or 0}"
            if name in _accel_devices():
                return name
        return "cpu"

    def host_view(self, bucket, flat):
        """The bucket's values as a float32 numpy array: the bucket itself on
        the CPU, else a pinned host copy (one device-to-host copy a step)."""
        if flat.device.type == "cpu":
            return flat.numpy()
        host = self._pinned.get(bucket.index())
        if host is None or host.numel() != flat.numel():
            host = torch.empty(flat.numel(), dtype=torch.float32, pin_memory=True)
            self._pinned[bucket.index()] = host
        host.copy_(flat)  # synchronous: the selection reads it next
        return host.numpy()

    def sparsifier(self, bucket):
        # Keyed by the bucket's layers either way: a bucket laid out anew
        # gets a sparsifier of its own, into which the residuals move.
        layers = tuple(int(g.numel()) for g in bucket.gradients())
        sizes = layers if self.per_layer else (int(bucket.buffer().numel()),)
        device = self.selection_device(bucket.buffer())
        key = (bucket.index(), layers, device)
        if key not in self._sparsifiers:
            if self.residual_on_device and bucket.buffer().device.type == "cuda" and device.startswith("cuda"):
                s = TorchBucketSparsifier(sizes, device=bucket.buffer().device, **self.options)
            else:
                s = BucketSparsifier(sizes, device=device, **self.options)
            s.set_epoch(self.epoch)
            # DDP rebuilds its buckets after the first iteration: a bucket
            # index with other layers replaces the old sparsifier, and each
            # parameter's residual and velocity move to where its layer now
            # lies (the momentum of a step is not lost).
            # A parameter may change buckets: the ones replaced are kept
            # until every bucket has been laid out anew.
            layout = self._layout(bucket)
            for k in [k for k in self._sparsifiers if k[0] == key[0]]:
                self._retired.append((self._sparsifiers.pop(k), self._layers.pop(k)))
            for old, was in self._retired + [(self._sparsifiers[k], self._layers[k]) for k in self._sparsifiers]:
                self._carry_over(old, was, s, layout)
            self._sparsifiers[key] = s
            self._layers[key] = layout
        else:
            self._retired.clear()  # the buckets are laid out for good
        return self._sparsifiers[key]

    def _layout(self, bucket):
        """Each parameter of the bucket (by identity) and the offset of its
        values in the bucket."""
        params = bucket.parameters() if hasattr(bucket, "parameters") else []
        out, at = {}, 0
        for p, g in zip(params, bucket.gradients()):
            out[id(p)] = (at, int(g.numel()))
            at += int(g.numel())
        return out

    def _carry_over(self, old, was, new, now):
        """The residual and velocity of each parameter the old sparsifier
        held (was: its layout), loaded where the new one lays it (now)."""
        residual, velocity = old.residual, old.velocity
        for pid, (at, n) in now.items():
            if pid in was and was[pid][1] == n:
                at0 = was[pid][0]
                new.load(at, residual[at0:at0 + n], velocity[at0:at0 + n] if len(velocity) else None)


def _accel_devices():
    from . import _accel
    return _accel.devices()


def sparse_allreduce_hook(state, bucket):
    flat = bucket.buffer().detach()
    if flat.dtype != torch.float32 or flat.device.type not in ("cpu", "cuda"):
        raise TypeError(f"accel sparse hook: bucket of {flat.dtype} on {flat.device}; expected float32 on the CPU "
                        "or a CUDA GPU")
    fut = torch.futures.Future()
    if not state.overlap:
        fut.set_result(_exchange(state, bucket, flat))
        return fut
    # DDP leaves the bucket's buffer alone until the future completes; one
    # thread keeps the buckets' steps in the order they came.
    if state._exchanger is None:
        state._exchanger = ThreadPoolExecutor(max_workers=1, thread_name_prefix="accel-sparse-hook")
    state._exchanger.submit(_exchange_into, fut, state, bucket, flat)
    return fut


def _exchange_into(fut, state, bucket, flat):
    try:
        out = _exchange(state, bucket, flat)
    except BaseException as e:  # DDP raises it where it waits for the future
        fut.set_exception(e)
        return
    fut.set_result(out)


def _exchange(state, bucket, flat):
    """The bucket's averaged sparse sum, as a tensor on its device."""
    sparsifier = state.sparsifier(bucket)
    if isinstance(sparsifier, TorchBucketSparsifier):
        idx, val = sparsifier.step(flat)  # on the bucket's GPU; the pairs come back
    else:
        idx, val = sparsifier.step(state.host_view(bucket, flat))  # a CPU bucket's own memory, no copy
    result = state.group.allreduce(int(flat.numel()), idx, val, tag=state.iteration)
    # DDP keeps its ranks in step: every counted member's contribution must
    # be of the step this one asked for, or the sum mixes steps.
    if any(int(t) != state.iteration for t in result["tags"]):
        raise RuntimeError(f"accel sparse hook: step {state.iteration} got a sum of tags {list(result['tags'])} "
                           f"from members {list(result['members'])}: a member is out of step")
    state.iteration += 1
    state.bytes_sent += result["bytes_sent"]
    state.pairs_sent += int(idx.size)
    out = torch.zeros_like(flat)
    if result["indices"].size:
        sums = torch.from_numpy(result["values"]) / float(len(result["members"]))
        where = torch.from_numpy(result["indices"].astype(np.int64))
        out[where.to(flat.device)] = sums.to(flat.device)
    return out


def sparsify(model, optimizer, ratio=0.001, group=None, method="ldte-hist", warmup=False, dense_below=1000,
             masking=True, overlap=True, per_layer=False, **group_options):
    """Sparse training of a DDP model in one call, set up the way deep
    gradient compression (Lin et al., 2018) trains well: the optimizer's
    momentum moves into the hook's momentum correction (the optimizer then
    runs without it, or the velocity would be applied twice) and the
    residual is masked where it was sent. The ratio's values are picked
    over each DDP bucket as a whole (per_layer=False): a layer then gets
    the share its gradient's magnitudes earn rather than ratio of its own
    values (at 0.1% a 2,560-value output layer sent 3 values a step), which
    in scripts/bench_sparse_mlp.py took the MLP from 84.6% to 86.5% at 0.1%
    (dense: 87.0%) with half the bytes. per_layer=True selects ratio of
    every layer, and sends layers of fewer than dense_below values whole.
    warmup=True ramps the ratio down by epoch (25%, 6.25%, ...;
    state.set_epoch): off by default, since a run of a few epochs then
    spends most of them warming up and meets the final ratio at its end
    (scripts/bench_sparse_mlp.py: 75.2% after 5 epochs at 0.1% with it,
    84.7% without).

        state = accel.torch.sparsify(ddp_model, torch.optim.SGD(ddp_model.parameters(), lr=0.05, momentum=0.9),
                                     ratio=0.001)
        for epoch in range(epochs):
            state.set_epoch(epoch)
            ...  # the usual loop: loss.backward(); optimizer.step()

    group: an accel.SparseGroup; by default SparseGroup.from_torch() over
    the model's process group (group_options go to it). Returns the hook's
    SparseHookState."""
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio <= 1:
        raise ValueError(f"sparsify: ratio must be a number in (0, 1], got {ratio!r}")
    if not isinstance(optimizer, torch.optim.SGD):
        raise TypeError(f"sparsify: optimizer must be SGD-like (torch.optim.SGD or a subclass), got "
                        f"{type(optimizer).__name__}: the hook's momentum correction replaces SGD's momentum, which "
                        "adaptive optimizers such as Adam do not have")
    momenta = {float(g.get("momentum", 0.0)) for g in optimizer.param_groups}
    if len(momenta) != 1:
        raise ValueError(f"sparsify: the optimizer's parameter groups have different momenta {sorted(momenta)}; "
                         "the hook has one")
    if any(g.get("nesterov", False) for g in optimizer.param_groups):
        raise ValueError("sparsify: nesterov momentum is not supported (the hook's momentum correction is plain "
                         "momentum)")
    if not isinstance(model, torch.nn.parallel.DistributedDataParallel):
        raise TypeError(f"sparsify: model must be wrapped in torch.nn.parallel.DistributedDataParallel, got "
                        f"{type(model).__name__}")
    if group is None:
        from . import SparseGroup
        group = SparseGroup.from_torch(getattr(model, "process_group", None), **group_options)
    momentum = momenta.pop()
    for g in optimizer.param_groups:
        g["momentum"] = 0.0
        g["dampening"] = 0.0
    state = SparseHookState(group, ratio=float(ratio), method=method, momentum=momentum, masking=masking,
                            warmup=warmup, dense_below=dense_below, overlap=overlap, per_layer=per_layer)
    model.register_comm_hook(state, sparse_allreduce_hook)
    return state
