"""accel from Python: top-k selection for gradient sparsification, the
Sparsifier (residual gradient compression), and the sparse allreduce group.

Arrays are never copied: pass float32, C-contiguous numpy arrays or CPU torch
tensors (any shape; they are read as flat). Anything else raises TypeError
(wrong dtype or type) or ValueError (not contiguous, not on the CPU, a ratio
outside (0, 1], NaN/Inf under nonfinite="error", ...).
"""
import numpy as _np
import os as _os

from ._accel import topk_device as _topk_device
from ._accel import BucketSparsifier as _BucketSparsifier, InputError, Sparsifier as _Sparsifier
from ._accel import TopKResult
try:  # built with UCX: the cluster engine runs the sparse allreduce
    from ._accel import SparseGroup as _SparseGroup
    from ._accel import SparseGroupOptions
except ImportError:
    from ._accel import sparse_group_missing as _sparse_group_missing
    _SparseGroup = SparseGroupOptions = None
from ._accel import topk as _topk

__all__ = ["topk", "Sparsifier", "BucketSparsifier", "SparseGroup", "TopKResult", "InputError", "as_float32_view"]


def as_float32_view(x, what="x"):
    """The flat float32 numpy view of a numpy array or a CPU torch tensor,
    sharing its memory; raises instead of copying."""
    if type(x).__module__.startswith("torch"):
        import torch

        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{what}: expected a tensor or an array, got {type(x).__name__}")
        if x.dtype != torch.float32:
            raise TypeError(f"{what}: dtype {x.dtype}, expected torch.float32")
        if x.device.type != "cpu":
            raise ValueError(f"{what}: on {x.device}, expected a CPU tensor")
        if not x.is_contiguous():
            raise ValueError(f"{what}: not contiguous (call .contiguous() first, which copies)")
        x = x.detach().numpy()
    if not isinstance(x, _np.ndarray):
        raise TypeError(f"{what}: expected a numpy array or a torch tensor, got {type(x).__name__}")
    if x.dtype != _np.float32:
        raise TypeError(f"{what}: dtype {x.dtype}, expected float32")
    if not x.flags.c_contiguous:
        raise ValueError(f"{what}: not C-contiguous (np.ascontiguousarray copies)")
    return x.reshape(-1)


def topk(x, ratio, method="ldte-hist", nonfinite="error", device="cpu"):
    """Indices (ascending, int64, in host memory) of about ratio * x.size
    largest |x| and the threshold tau, as a TopKResult. Methods: exact,
    ldte-bs, ldte-hist, nth_element, sample.

    x on a GPU (a CUDA torch tensor, or anything with
    __cuda_array_interface__, float32 and contiguous) is read where it is,
    by the device it lives on (device is then ignored): exact and ldte-hist
    bring back only histograms and candidates. A torch tensor's stream is
    synchronised first; for other arrays the caller must have finished
    writing x."""
    cuda = _cuda_view(x)
    if cuda is not None:
        ptr, n, dev = cuda
        return _topk_device(ptr, n, float(ratio), method, nonfinite, dev)
    return _topk(as_float32_view(x), float(ratio), method, nonfinite, device)


def _cuda_view(x, what="x"):
    """(address, size, accel device) of float32 contiguous GPU memory, or
    None for host arrays."""
    if type(x).__module__.startswith("torch"):
        import torch

        if not isinstance(x, torch.Tensor) or x.device.type != "cuda":
            return None
        if x.dtype != torch.float32:
            raise TypeError(f"{what}: dtype {x.dtype}, expected torch.float32")
        if not x.is_contiguous():
            raise ValueError(f"{what}: not contiguous (call .contiguous() first, which copies)")
        torch.cuda.current_stream(x.device).synchronize()  # accel reads it on a stream of its own
        return int(x.data_ptr()), int(x.numel()), f"cuda:{x.device.index or 0}"
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is None:
        return None
    if cai.get("typestr") != "<f4":
        raise TypeError(f"{what}: GPU array of {cai.get('typestr')}, expected float32 (<f4)")
    shape = tuple(cai["shape"])
    n = int(_np.prod(shape)) if shape else 1
    strides = cai.get("strides")
    if strides is not None and tuple(strides) != tuple(int(_np.prod(shape[i + 1:])) * 4 for i in range(len(shape))):
        raise ValueError(f"{what}: not contiguous (copy it to a contiguous array first)")
    device = getattr(x, "device", None)  # CuPy: x.device.id
    return int(cai["data"][0]), n, f"cuda:{int(getattr(device, 'id', 0) or 0)}"


class _Residuals:
    """What both sparsifiers offer beside step(): the epoch (warm-up), this
    epoch's ratio, the residual kept, the length."""

    def set_epoch(self, epoch):
        self._s.set_epoch(int(epoch))

    @property
    def ratio(self):
        return self._s.ratio

    @property
    def residual(self):
        return self._s.residual

    @property
    def size(self):
        return self._s.size


class Sparsifier(_Residuals):
    """Residual gradient compression of a length-n gradient: R <- R + G (or
    momentum correction U <- m U + G, R <- R + U), select on R, emit the
    selected (indices, values) and zero them in R (and U with masking)."""

    def __init__(self, n, ratio=0.001, method="ldte-hist", momentum=0.0, masking=True, warmup=False,
                 nonfinite="error", device="cpu"):
        self._s = _Sparsifier(int(n), float(ratio), method, float(momentum), bool(masking), bool(warmup),
                              nonfinite, device)

    def step(self, gradient):
        """(indices int64, values float32) of this step's selection."""
        return self._s.step(as_float32_view(gradient, "gradient"))


class BucketSparsifier(_Residuals):
    """The Sparsifier over a bucket of layers laid end to end (a DDP
    bucket): one accumulation pass, a selection per layer, and the layers
    under host_below values selected exactly on the host in one parallel
    pass (exactly, whatever the method; host_below=0 sends every layer to
    the device with the chosen method), not one launch each. Layers
    under dense_below values are sent whole and keep no residual (with
    momentum they send their velocity: momentum SGD). step() returns
    (indices uint32 into the bucket, ascending; values float32)."""

    def __init__(self, sizes, ratio=0.001, method="ldte-hist", momentum=0.0, masking=True, warmup=False,
                 dense_below=0, host_below=1 << 16, nonfinite="error", device="cpu"):
        self.sizes = tuple(int(n) for n in sizes)
        self._s = _BucketSparsifier(list(self.sizes), float(ratio), method, float(momentum), bool(masking),
                                    bool(warmup), int(dense_below), int(host_below), nonfinite, device)

    def step(self, bucket):
        return self._s.step(as_float32_view(bucket, "bucket"))

    @property
    def velocity(self):
        """Momentum correction's U (empty without momentum)."""
        return self._s.velocity

    def load(self, at, residual, velocity=None):
        """Values [at, at + len(residual)) of the residual and velocity set
        from another sparsifier's (a layer whose bucket was laid out anew)."""
        self._s.load(int(at), as_float32_view(residual, "residual"),
                     None if velocity is None else as_float32_view(velocity, "velocity"))


class SparseGroup:
    """A sparse allreduce group: every member's (indices, values) in, their
    sum out. Rank 0 runs the job's coordinator in this process and listens
    on `coordinator`; the other ranks connect to it. rank, size and
    coordinator default to the launcher's environment (OMPI_COMM_WORLD_*,
    SLURM_*, PMI_*, torchrun's RANK and WORLD_SIZE; ACCEL_COORDINATOR, else
    torchrun's MASTER_ADDR with MASTER_PORT + 1). from_torch() makes the
    group of a torch.distributed process group. The group's engine runs inside
    allreduce() and close(), on the calling thread.
    exchange (rank 0's): "auto", "allgather" or "reduce-scatter".
    Elastic membership: with max_size (rank 0's) above size, members
    started with rank=-1 join the running group; each gets the next free
    rank (join(), or its first allreduce) and counts from the step it
    reaches. close() on a rank other than 0 leaves the group at a step
    boundary."""

    @classmethod
    def from_torch(cls, group=None, host=None, **options):
        """The group of a torch.distributed process group (default: the
        world), as a DDP user already has one: its ranks and size, and a
        coordinator on a free port of rank 0's host (host: the address the
        others reach it at; default: torch's MASTER_ADDR, else this host's
        name) with a fresh job token, both sent to the others through the
        process group. Every member of the group must call it."""
        import secrets
        import socket
        import torch.distributed as dist
        if not dist.is_available() or not dist.is_initialized():
            raise ValueError("from_torch: torch.distributed is not initialized (call init_process_group first)")
        rank, size = dist.get_rank(group), dist.get_world_size(group)
        if rank < 0:
            raise ValueError("from_torch: this process is not a member of the group")
        info = [None]
        if rank == 0:
            host = host or _os.environ.get("MASTER_ADDR") or socket.gethostname()
            with socket.socket() as s:  # a free port; the coordinator binds it at once
                s.bind(("", 0))
                port = s.getsockname()[1]
            info = [(f"{host}:{port}", secrets.randbits(63) | 1)]
        src = 0
        if group is not None and group is not dist.distributed_c10d._get_default_group():
            global_rank = getattr(dist, "get_global_rank", None) or dist.distributed_c10d._get_global_rank  # torch < 2
            src = global_rank(group, 0)
        dist.broadcast_object_list(info, src=src, group=group)
        coordinator, token = info[0]
        return cls(rank=rank, size=size, coordinator=coordinator, job=token, **options)

    def __init__(self, rank=None, size=None, coordinator=None, job=None, timeout_ms=None, keepalive_ms=None,
                 tls=None, log_json=None, snapshot_dir=None, exchange=None, max_size=None):
        if SparseGroupOptions is None:
            raise ImportError(_sparse_group_missing)
        o = SparseGroupOptions()  # the launcher's environment
        for name, value in (("rank", rank), ("size", size), ("max_size", max_size), ("coordinator", coordinator), ("job", job),
                            ("timeout_ms", timeout_ms), ("keepalive_ms", keepalive_ms), ("tls", tls),
                            ("log_json", log_json), ("snapshot_dir", snapshot_dir), ("exchange", exchange)):
            if value is not None:
                setattr(o, name, value)
        self._g = _SparseGroup(o)

    @property
    def rank(self):
        return self._g.rank

    @property
    def size(self):
        return self._g.size

    def join(self):
        """This member's rank; a joiner (rank=-1) asks the coordinator for it
        first (ValueError when the group is full)."""
        return self._g.join()

    def allreduce(self, n, indices, values, tag=0):
        """The members' sum as a dict: indices (uint32, ascending), values
        (float32), members (the ranks counted), tags, step, bytes_sent,
        exchange (the one that delivered it) and rounds. Bad pairs raise
        only after this member took part in the step with none, so the
        next call is the next step on every member."""
        try:
            idx, val = self._pairs(n, indices, values)
        except (TypeError, ValueError, OverflowError):
            empty_n = n if isinstance(n, (int, _np.integer)) and 0 <= int(n) <= 1 << 32 else 0
            self._g.allreduce(int(empty_n), _np.zeros(0, _np.uint32), _np.zeros(0, _np.float32), int(tag))
            raise
        return self._g.allreduce(int(n), idx.reshape(-1), val, int(tag))

    @staticmethod
    def _pairs(n, indices, values):
        idx = _np.asarray(indices)
        if idx.dtype != _np.uint32:  # e.g. the Sparsifier's int64: checked, then narrowed (k values, not n)
            if idx.size and (idx.min() < 0 or idx.max() >= int(n)):
                raise ValueError(f"indices outside 0..{int(n) - 1}")
            idx = idx.astype(_np.uint32)
        idx = _np.ascontiguousarray(idx)
        val = as_float32_view(values, "values")
        if idx.size != val.size:
            raise ValueError(f"{idx.size} indices but {val.size} values")
        return idx, val

    def close(self):
        self._g.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
