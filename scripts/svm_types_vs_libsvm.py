#!/usr/bin/env python3
"""Every svm type and option of the differential tests (tests/python/
test_svm_vs_libsvm.py), accel against LIBSVM 3.24 side by side, as a table:
dual objective per binary problem (worst relative difference), support
vectors, agreement of the two predictors on held-out rows, and wall time of
each svm-train.

    scripts/svm_types_vs_libsvm.py [--accel build/bin/accel]

Needs libsvm-tools and scikit-learn (Debian: scripts/setup.sh installs both).
"""
import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "python"))
import test_svm_vs_libsvm as t  # noqa: E402  (the cases and the parsers the tests use)


def timed(cmd):
    t0 = time.perf_counter()
    out = t.run(cmd)
    return out, time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--accel", default=str(REPO / "build" / "bin" / "accel"))
    a = ap.parse_args()
    print("| data | options | problems | worst rel obj | nSV LIBSVM / accel | SV diff | held-out agreement "
          "| LIBSVM s | accel s |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        data = t.write_datasets(d)
        for name, opts in t.CASES:
            train, test = data[name], data[name + ".test"]
            regression = " -s 3" in " " + opts or " -s 4" in " " + opts
            nu_svc = " -s 1" in " " + opts
            lib_model, acc_model = d / "lib.model", d / "acc.model"
            lib_out, lib_s = timed(["svm-train", "-e", "1e-5", *re.sub(r"--solver \w+", "", opts).split(), train,
                                    lib_model])
            acc_out, acc_s = timed([a.accel, "svm-train", "-e", "1e-5", *opts.split(), "--json", train, acc_model])
            want = t.libsvm_problems(lib_out)
            got = [p["obj"] * (p["r"] ** 2 if nu_svc else 1.0) for p in json.loads(acc_out)["problems"]]
            worst = max(abs(g - w) / max(abs(w), 1e-12) for g, (w, _) in zip(got, want))
            lib_sv, acc_sv = t.sv_rows(lib_model, train), t.sv_rows(acc_model, train)
            t.run(["svm-predict", test, lib_model, d / "lib.pred"])
            t.run([a.accel, "svm-predict", test, acc_model, d / "acc.pred"])
            lp, ap_ = t.predictions(d / "lib.pred"), t.predictions(d / "acc.pred")
            if regression:
                agree = f"max rel {np.max(np.abs(ap_ - lp) / np.maximum(np.abs(lp), 1e-6)):.1e}"
            else:
                agree = f"{int(np.sum(ap_ == lp))}/{lp.size} labels"
            print(f"| {name} | `{opts}` | {len(want)} | {worst:.1e} | {len(lib_sv)} / {len(acc_sv)} | "
                  f"{t.sym_diff(lib_sv, acc_sv)} | {agree} | {lib_s:.3f} | {acc_s:.3f} |")


if __name__ == "__main__":
    main()
