"""Residual gradient compression with the residual where the gradients are:
the BucketSparsifier's algorithm on torch tensors, so a bucket on a GPU is
accumulated, selected and cleared on that GPU and only the selected
(index, value) pairs come to the host.

The same steps as accel.BucketSparsifier (host/algorithms/sparsify/
bucket_sparsifier.cpp), layer by layer: R <- R + G (with momentum
correction U <- m U + G, R <- R + U); layers below dense_below are sent
whole; layers below host_below take their exact top-k (torch.topk for the
k-th largest |R|, then every finite |R| at or above it); larger layers are
selected by accel.topk on the tensor itself (exact or ldte-hist read it on
its device: only histograms and candidates cross to the host). The
selected values are sent, then zeroed in R (and in U with momentum-factor
masking). On the CPU this gives the C++ sparsifier's results exactly
(tests/python/test_sparse_python.py); momentum's u = m u + g may round
differently where the C++ loop fuses the multiply-add.
"""
import math

import numpy as np
import torch

from . import topk


class TorchBucketSparsifier:
    def __init__(self, sizes, ratio=0.001, method="ldte-hist", momentum=0.0, masking=True, warmup=False,
                 dense_below=0, host_below=1 << 16, nonfinite="error", device="cpu"):
        sizes = [int(s) for s in sizes]
        if not sizes:
            raise ValueError("bucket sparsifier: no layers")
        for i, s in enumerate(sizes):
            if s < 1:
                raise ValueError(f"bucket sparsifier: layer {i} has {s} values")
        if not (0 < ratio <= 1):
            raise ValueError(f"ratio {ratio} is outside (0, 1]")
        if not (0 <= momentum < 1):
            raise ValueError(f"momentum {momentum} is outside [0, 1)")
        if dense_below < 0:
            raise ValueError(f"dense_below {dense_below} is negative")
        if nonfinite not in ("error", "exclude"):
            raise ValueError(f"nonfinite {nonfinite}: expected error or exclude")
        self.sizes = tuple(sizes)
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        if self.offsets[-1] >= 1 << 32:
            raise ValueError("bucket sparsifier: 2^32 values or more")
        self.options = dict(ratio=float(ratio), method=method, momentum=float(momentum), masking=bool(masking),
                            warmup=bool(warmup), dense_below=int(dense_below), host_below=int(host_below),
                            nonfinite=nonfinite)
        self.device = torch.device(device)
        n = int(self.offsets[-1])
        self._r = torch.zeros(n, dtype=torch.float32, device=self.device)
        self._u = torch.zeros(n, dtype=torch.float32, device=self.device) if momentum > 0 else None
        self._pinned = {}  # dtype -> pinned host buffer the pairs are staged through
        self.epoch = 0

    @property
    def size(self):
        return int(self.offsets[-1])

    @property
    def ratio(self):
        o = self.options
        return max(o["ratio"], 0.25 * 0.25 ** self.epoch) if o["warmup"] else o["ratio"]

    @property
    def residual(self):
        return self._r.cpu().numpy()

    @property
    def velocity(self):
        return self._u.cpu().numpy() if self._u is not None else np.zeros(0, np.float32)

    def load(self, at, residual, velocity=None):
        """Values [at, at + len(residual)) of the residual and velocity set
        from another sparsifier's (a layer whose bucket was laid out anew)."""
        r = torch.as_tensor(np.asarray(residual, np.float32))
        n = r.numel()
        if at < 0 or at + n > self.size:
            raise ValueError(f"sparsifier state for values [{at}, {at + n}) of a bucket of {self.size}")
        self._r[at:at + n] = r.to(self.device)
        if self._u is not None:
            self._u[at:at + n] = 0.0 if velocity is None else torch.as_tensor(np.asarray(velocity, np.float32)).to(
                self.device)

    def set_epoch(self, epoch):
        self.epoch = float(epoch)

    def step(self, gradient):
        """Accumulates the bucket's flat gradient (a float32 tensor on this
        sparsifier's device) and returns the selected (indices uint32,
        values float32) as numpy arrays, ascending."""
        o = self.options
        g = gradient.reshape(-1)
        if g.numel() != self.size:
            raise ValueError(f"bucket of {g.numel()} values for a sparsifier of {self.size}")
        if self._u is not None:
            self._u.mul_(o["momentum"]).add_(g)
            self._r.add_(self._u)
        else:
            self._r.add_(g)
        ratio = self.ratio
        picked = []
        for layer, n in enumerate(self.sizes):
            base = int(self.offsets[layer])
            r = self._r[base:base + n]
            whole = n < o["dense_below"]
            if whole or n < o["host_below"]:
                idx = self._select_exact(r, ratio, whole, layer, base)
            else:
                try:
                    res = topk(r, ratio, method=o["method"], nonfinite=o["nonfinite"],
                               device="cpu" if self.device.type == "cpu" else str(self.device))
                except ValueError as e:
                    raise ValueError(f"layer {layer} (bucket offset {base}): {e}") from None
                idx = torch.from_numpy(np.asarray(res.indices)).to(self.device)
            picked.append(idx + base)
        idx = torch.cat(picked) if picked else torch.zeros(0, dtype=torch.int64, device=self.device)
        values = self._r[idx]
        self._r[idx] = 0.0
        if self._u is not None and o["masking"]:
            # Whole layers keep their velocity: they are momentum SGD.
            masked = idx >= 0
            for layer, n in enumerate(self.sizes):
                if n < o["dense_below"]:
                    lo, hi = int(self.offsets[layer]), int(self.offsets[layer + 1])
                    masked &= (idx < lo) | (idx >= hi)
            self._u[idx[masked]] = 0.0
        return self._to_host(idx.to(torch.int32)).view(np.uint32), self._to_host(values)

    def _to_host(self, t):
        """A numpy copy of t: from a GPU through a pinned staging buffer
        (one DMA; pageable memory would be staged by the driver)."""
        if t.device.type == "cpu":
            return t.numpy().copy()
        buf = self._pinned.get(t.dtype)
        if buf is None or buf.numel() < t.numel():
            buf = torch.empty(max(t.numel(), 1024), dtype=t.dtype, pin_memory=True)
            self._pinned[t.dtype] = buf
        buf[:t.numel()].copy_(t)
        return buf[:t.numel()].numpy().copy()

    def _select_exact(self, r, ratio, whole, layer, base):
        """The exact selection of one small layer, as the C++ select_exact:
        the k largest finite |r| and their ties (every finite value when
        whole), ascending."""
        finite = torch.isfinite(r)
        bad = int(r.numel() - int(finite.sum()))
        if bad and self.options["nonfinite"] == "error":
            first = int(torch.nonzero(~finite)[0])
            what = "NaN" if bool(torch.isnan(r[first])) else "Inf"
            raise ValueError(f"layer {layer} (bucket offset {base}): its value {first} is {what} "
                             "(use nonfinite exclude to skip non-finite values)")
        count = r.numel() - bad
        k = count if whole else min(min(math.ceil(ratio * r.numel()), r.numel()), count)
        if k == 0:
            return torch.zeros(0, dtype=torch.int64, device=r.device)
        mag = torch.where(finite, r.abs(), torch.full_like(r, -1.0))
        tau = 0.0 if k == count else torch.topk(mag, k, sorted=True).values[k - 1]
        return torch.nonzero(finite & (mag >= tau)).reshape(-1)
