"""One member of the erring-member test (test_sparse_python.py): six steps of
seeded pairs; with --err STEP this member's pairs of that step are bad (a
NaN, then an index out of range on the Python side's own check at STEP + 2):
it must get ValueError and go on. With --rank -1 it joins a running group
(the elastic test). Saves every sum it got to OUT/rank-R.npz."""
import argparse
import time

import numpy as np

import accel


def pairs(rank, step, n=1000):
    rng = np.random.default_rng(100 * rank + step)
    idx = np.sort(rng.choice(n, 40, replace=False)).astype(np.uint32)
    return idx, rng.standard_normal(40).astype(np.float32)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--size", type=int, required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--err", type=int, default=0)
    p.add_argument("--max-size", type=int, default=0)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--pause-ms", type=int, default=0)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    saved = {}
    with accel.SparseGroup(rank=a.rank, size=a.size, coordinator=f"127.0.0.1:{a.port}", timeout_ms=20000,
                           max_size=a.max_size) as g:
        rank = g.join()  # a joiner's (--rank -1): the coordinator's
        for step in range(1, a.steps + 1):
            time.sleep(a.pause_ms / 1000)
            idx, val = pairs(rank, step)
            if step == a.err:
                val[3] = np.nan
            if a.err and step == a.err + 2:
                idx = idx.astype(np.int64)
                idx[-1] = 5000  # outside 0..n-1: refused by the Python wrapper before the C++ call
            try:
                r = g.allreduce(1000, idx, val, tag=step)
            except ValueError as e:
                if step not in (a.err, a.err + 2):
                    raise
                print(f"step {step}: {e}")
                continue
            saved[f"idx{step}"], saved[f"val{step}"] = r["indices"], r["values"]
            saved[f"members{step}"], saved[f"tags{step}"] = np.array(r["members"]), np.array(r["tags"])
    np.savez(f"{a.out}/rank-{rank}.npz", **saved)


if __name__ == "__main__":
    main()
