"""PyTorch's side of the GPU check (scripts/device_check.sh): the work accel's
kernels do, done the way a PyTorch user does it, on the same device, timed
the same way as `accel bench-kernels` (inputs already on the device, the
median of several runs, each ended by a synchronize).

  read bandwidth  one pass over 256M floats (torch.amax): the card's read rate
  top-k           torch.topk(|x|, k) at 0.1% of 16M and 256M Laplacian floats,
                  beside accel.topk on the same tensor (read where it is) when
                  the accel module imports
  k-means step    ||c||^2 - 2 x.c (one matmul), argmin, per-cluster sums
                  (index_add_) and counts (bincount), the step
                  kmeans_assign makes: Fashion-MNIST K = 256; 1M x 128 K = 1024
  CSR RBF rows    64 query rows against every Fashion-MNIST row as CSR:
                  exp(-g (|x|^2 + |q|^2 - 2 X q)), X q by torch.sparse.mm

Writes one JSON object (--out). --quick: small shapes, for the CPU half.
"""
import argparse
import gzip
import json
import math
import os
import time

import numpy as np
import torch


def fashion_mnist(directory, rows):
    path = os.path.join(directory, "train-images-idx3-ubyte.gz")
    if not os.path.exists(path):
        rng = np.random.default_rng(3)  # the shape bench-kernels falls back to
        x = rng.random((rows, 784), dtype=np.float32)
        x[rng.random((rows, 784)) < 0.5] = 0
        return x, "random (no " + path + ")"
    with gzip.open(path, "rb") as f:
        raw = f.read()
    n = int.from_bytes(raw[4:8], "big")
    x = np.frombuffer(raw, dtype=np.uint8, offset=16).reshape(n, 784)[:rows]
    return x.astype(np.float32) / 255.0, path


def timed(fn, device, repeats):
    """Median seconds of `repeats` runs after one untimed run."""
    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    fn()
    sync()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def laplace(n, device, seed):
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.empty(n, device=device, dtype=torch.float32).exponential_(generator=g)
    sign = torch.randint(0, 2, (n,), device=device, generator=g, dtype=torch.int8)
    return torch.where(sign == 1, x, -x).mul_(0.005)


def kmeans_step(x, c):
    """One Lloyd step: labels, per-cluster sums and counts, inertia."""
    half = 0.5 * (c * c).sum(dim=1)
    score = torch.addmm(half, x, c.t(), beta=1.0, alpha=-1.0)  # |c|^2/2 - x.c
    labels = score.argmin(dim=1)
    sums = torch.zeros(c.shape, dtype=torch.float64, device=x.device).index_add_(0, labels, x.double())
    counts = torch.bincount(labels, minlength=c.shape[0])
    inertia = (2 * score.gather(1, labels[:, None]).double().sum() + (x.double() ** 2).sum())
    return labels, sums, counts, inertia


def blobs(n, d, k, device, seed=11):
    g = torch.Generator(device=device).manual_seed(seed)
    centres = 4 * torch.randn(k, d, device=device, generator=g)
    x = centres[torch.arange(n, device=device) % k] + torch.randn(n, d, device=device, generator=g)
    return x


def csr_rbf(xs, q, xnorm, qnorm, gamma):
    dots = torch.sparse.mm(xs, q.t())  # rows x queries
    return torch.exp(-gamma * (xnorm[:, None] + qnorm[None, :] - 2 * dots))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda")
    p.add_argument("--fashion-mnist", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--out", required=True)
    a = p.parse_args()
    dev = torch.device(a.device)
    if dev.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False  # FP32, as accel's sgemm
        torch.backends.cudnn.allow_tf32 = False
    out = {"torch": torch.__version__, "device": str(dev),
           "device_name": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"}

    # Read bandwidth and top-k.
    sizes = [1 << 20] if a.quick else [1 << 24, 1 << 28]
    out["topk"] = []
    try:
        import accel
    except ImportError as e:
        accel = None
        out["accel_import_error"] = str(e)
    for n in sizes:
        x = laplace(n, dev, seed=n)
        k = math.ceil(0.001 * n)
        t_topk = timed(lambda x=x, k=k: torch.topk(x.abs(), k, sorted=False), dev, a.repeats)
        t_read = timed(lambda x=x: torch.amax(x), dev, a.repeats)
        row = {"n": n, "k": k, "torch_topk_seconds": t_topk, "read_seconds": t_read,
               "read_bytes_per_second": 4 * n / t_read}
        if accel is not None:
            for method in ("exact", "ldte-hist"):
                key = method.replace("-", "_")
                row[f"accel_{key}_seconds"] = timed(lambda x=x, method=method: accel.topk(x, 0.001, method=method), dev, a.repeats)
                r = accel.topk(x, 0.001, method=method)
                row[f"accel_{key}_selected"] = int(len(r.indices))
                row[f"accel_{key}_passes"] = int(r.passes)
                # Where one call's time goes: the C++ select, its device passes, its copies back.
                row[f"accel_{key}_select_seconds"] = float(r.seconds)
                row[f"accel_{key}_pass_seconds"] = float(r.pass_seconds)
                row[f"accel_{key}_copy_seconds"] = float(r.copy_seconds)
            # exact against torch.topk: the same set when no value ties the k-th
            r = accel.topk(x, 0.001, method="exact")
            want = torch.topk(x.abs(), k, sorted=False).indices.cpu().numpy()
            row["accel_exact_equals_torch"] = bool(r.ties == 0 and np.array_equal(np.sort(want), r.indices))
        out["topk"].append(row)
        del x
    if dev.type == "cuda":
        torch.cuda.empty_cache()

    # k-means steps.
    fm, source = fashion_mnist(a.fashion_mnist, 2000 if a.quick else 60000)
    out["images"] = source
    out["kmeans"] = []
    shapes = [("fashion-mnist", None, 256)] + [("blobs", (20000, 128) if a.quick else (1000000, 128), 64 if a.quick else 1024)]
    for name, shape, k in shapes:
        x = torch.from_numpy(fm).to(dev) if shape is None else blobs(shape[0], shape[1], k, dev)
        c = x[:k].clone()
        t = timed(lambda x=x, c=c: kmeans_step(x, c), dev, a.repeats)
        out["kmeans"].append({"data": name, "rows": int(x.shape[0]), "dim": int(x.shape[1]), "k": k,
                              "torch_step_seconds": t})
        del x, c

    # CSR RBF rows: bench-kernels' queries (64 rows spread over the images).
    rows = fm.shape[0]
    xs_dense = torch.from_numpy(fm)
    xs = xs_dense.to_sparse_csr().to(dev) if hasattr(xs_dense, "to_sparse_csr") else xs_dense.to_sparse().to(dev)
    qi = torch.tensor([i * (rows // 64) for i in range(64)])
    q = xs_dense[qi].to(dev)
    xnorm = (xs_dense.double() ** 2).sum(dim=1).float().to(dev)
    qnorm = xnorm[qi.to(dev)]
    gamma = 1.0 / 784
    try:
        t = timed(lambda: csr_rbf(xs, q, xnorm, qnorm, gamma), dev, a.repeats)
        layout = "csr"
    except (RuntimeError, NotImplementedError):  # an older PyTorch without CSR x dense here
        xs = xs_dense.to_sparse().to(dev)
        t = timed(lambda: csr_rbf(xs, q, xnorm, qnorm, gamma), dev, a.repeats)
        layout = "coo"
    out["csr_rbf"] = {"rows": rows, "queries": 64, "nnz": int((fm != 0).sum()), "layout": layout,
                      "torch_seconds": t}
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
