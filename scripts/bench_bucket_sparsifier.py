#!/usr/bin/env python3
"""One sparsification step of a whole model's gradient, per layer, two ways:
a Sparsifier per layer (one selection launch per layer, as the DDP hook did
before) against one BucketSparsifier for the bucket (the layers under 64Ki
values in one host pass, the larger ones one launch each). The layer sizes
are ResNet-50's (161 tensors, 25.6M values; most tensors are small,
BatchNorm's above all). Medians of --steps steps after one warm-up step.

    python3 scripts/bench_bucket_sparsifier.py [--ratio 0.001] [--method ldte-hist] [--steps 20]
"""
import argparse
import statistics
import time

import numpy as np

import accel


def resnet50_sizes():
    sizes = [7 * 7 * 3 * 64, 64, 64]  # stem conv, its BatchNorm (weight, bias)
    inplanes = 64
    for width, blocks in ((64, 3), (128, 4), (256, 6), (512, 3)):
        for b in range(blocks):
            sizes += [inplanes * width, width, width, 9 * width * width, width, width, width * 4 * width,
                      4 * width, 4 * width]
            if b == 0:
                sizes += [inplanes * 4 * width, 4 * width, 4 * width]  # downsample conv + BatchNorm
            inplanes = 4 * width
    return sizes + [2048 * 1000, 1000]


def median_step(step, grads):
    step(grads[0])  # warm-up: buffers, thread pools
    times = []
    for g in grads[1:]:
        t0 = time.perf_counter()
        step(g)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ratio", type=float, default=0.001)
    p.add_argument("--method", default="ldte-hist")
    p.add_argument("--steps", type=int, default=20)
    a = p.parse_args()
    sizes = resnet50_sizes()
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    n = int(offsets[-1])
    rng = np.random.default_rng(0)
    grads = [rng.laplace(0, 1e-3, n).astype(np.float32) for _ in range(min(a.steps, 4) + 1)]
    grads = [grads[i % len(grads)] for i in range(a.steps + 1)]
    opts = dict(ratio=a.ratio, method=a.method, momentum=0.9)
    layers = [accel.Sparsifier(s, **opts) for s in sizes]

    def per_layer(g):
        for s, o, k in zip(layers, offsets, sizes):
            s.step(g[o:o + k])

    bucket = accel.BucketSparsifier(sizes, **opts)
    small = sum(1 for s in sizes if s < 1 << 16)
    t_layers = median_step(per_layer, grads)
    t_bucket = median_step(bucket.step, grads)
    print(f"ResNet-50's {len(sizes)} tensors ({n / 1e6:.1f}M values, {small} under 64Ki), {a.method} at "
          f"{a.ratio:g}, momentum correction, medians of {a.steps} steps")
    print(f"  a Sparsifier per layer: {t_layers * 1e3:8.2f} ms a step")
    print(f"  one BucketSparsifier:   {t_bucket * 1e3:8.2f} ms a step  ({t_layers / t_bucket:.2f}x)")


if __name__ == "__main__":
    main()
