#!/usr/bin/python3
"""Compare two builds of `accel` on SVM training: speed and identical models.
What a change that must leave the solver's results alone (a refactoring)
is measured with, before and after, on one machine.

A build is a directory holding accel, libaccel.so.0, libaccel_transport.so.0
(copied from build/bin, build/host and build/transport); it runs as
LD_LIBRARY_PATH=DIR DIR/accel.

    mkdir -p /tmp/old && cp build/bin/accel build/host/libaccel.so.0 build/transport/libaccel_transport.so.0 /tmp/old
    # ... change, rebuild, copy into /tmp/new likewise ...
    /usr/bin/python3 scripts/compare_builds.py --base /tmp/old --new /tmp/new --repeat 7
    /usr/bin/python3 scripts/compare_builds.py --base /tmp/old            # the baseline alone, saved
    /usr/bin/python3 scripts/compare_builds.py --base /tmp/old --new /tmp/new --reuse-base

Per case and build: --repeat runs; medians of the solver seconds (svm-train
--json seconds.total; for coordinator runs seconds.job) and of wall seconds;
the model file of the first run is kept. The baseline's results and models are
saved under WORK/base_results/ (--reuse-base reads them instead of
rerunning the base build; cases missing there are run).

Printed per case: base s, new s, new/base (solver and wall), whether the
model files are byte-identical, and when not, the largest relative
difference of the per-problem dual objectives ("obj" in the JSON).
Distributed runs split rows by measured speed, so their models are not
byte-identical even between two runs of one build (objective differences of
~1e-11..1e-9 seen); judge them by the objective and SV difference.
WORK is $ACCEL_COMPARE_DIR (default /tmp/accel-compare).
Exit status: 0 when everything ran and every model is identical, 1 when
some model differs, 2 when a run failed.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_svm import read_idx, write_libsvm  # noqa: E402
from bench_svm_cluster import free_port  # noqa: E402

# --work-dir: the data sets (Fashion-MNIST as LIBSVM text), the saved
# baseline and the new build's models.
ROOT = Path(os.environ.get("ACCEL_COMPARE_DIR", "/tmp/accel-compare"))
DATA = ROOT / "data"
BASE_RESULTS = ROOT / "base_results"
FASHION = Path("/usr/share/datasets/fashion-mnist")
TIMEOUT = 300

# name: (data file, args, kind)   kind: "single" or ("dist", workers)
CASES = {
    "fm2":       ("fm2_10k.svm", ["-c", "10", "-g", "0.02"], "single"),
    "fm10":      ("fm10_4k.svm", ["-c", "10", "-g", "0.02"], "single"),
    "fm10-nu":   ("fm10_4k.svm", ["-s", "1", "-n", "0.3", "-g", "0.02"], "single"),
    "eps-svr":   ("reg_3k.svm", ["-s", "3", "-c", "1", "-g", "0.02", "-p", "0.5"], "single"),
    "nu-svr":    ("reg_3k.svm", ["-s", "4", "-n", "0.3", "-c", "1", "-g", "0.02"], "single"),
    "one-class": ("fm2_10k.svm", ["-s", "2", "-n", "0.1", "-g", "0.02"], "single"),
    "fm2-multi2": ("fm2_10k.svm", ["--shrink", "multi2", "-c", "10", "-g", "0.02"], "single"),
    "dist1":     ("fm2_5k.svm", ["-c", "10", "-g", "0.02"], ("dist", 1)),
    "dist2":     ("fm2_5k.svm", ["-c", "10", "-g", "0.02"], ("dist", 2)),
}


# ---------------------------------------------------------------- data
def prepare_data():
    DATA.mkdir(parents=True, exist_ok=True)
    files = ["fm2_10k.svm", "fm2_5k.svm", "fm10_4k.svm", "reg_3k.svm"]
    if all((DATA / f).exists() for f in files):
        return
    x = read_idx(FASHION / "train-images-idx3-ubyte.gz")[:10000].reshape(-1, 784) / 255.0
    y = read_idx(FASHION / "train-labels-idx1-ubyte.gz")[:10000].astype(int)
    parity = np.where(y % 2 == 1, 1, -1)
    # The regression set's targets are the class numbers, written as integers.
    for name, rows, labels in (("fm2_10k.svm", 10000, parity), ("fm2_5k.svm", 5000, parity),
                               ("fm10_4k.svm", 4000, y), ("reg_3k.svm", 3000, y)):
        if not (DATA / name).exists():
            write_libsvm(DATA / name, x[:rows], labels[:rows])


# ---------------------------------------------------------------- runs
class RunError(Exception):
    pass


def kill(p):
    if p.poll() is None:
        p.kill()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def run_single(build, train, model, args):
    env = dict(os.environ, LD_LIBRARY_PATH=str(build), OMP_NUM_THREADS=str(os.cpu_count()))
    cmd = [str(build / "accel"), "svm-train", *args, "--json", str(train), str(model)]
    t0 = time.perf_counter()
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        raise RunError(f"timed out after {TIMEOUT} s: {' '.join(cmd)}")
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise RunError(f"exit {r.returncode}: {' '.join(cmd)}\n{r.stderr.strip()[-800:]}")
    info = json.loads(r.stdout.strip().splitlines()[-1])
    return {"fit": info["seconds"]["total"], "wall": wall,
            "obj": [p.get("obj") for p in info.get("problems", [])], "json": info}


def run_dist(build, train, model, args, workers, log):
    """As scripts/bench_svm_cluster.py: coordinator on core 0, worker w on core
    w % cpus, one thread each, loopback, --device cpu."""
    cpus = os.cpu_count()
    env = dict(os.environ, LD_LIBRARY_PATH=str(build), OMP_NUM_THREADS="1")
    port = free_port()
    pin = lambda core: ["taskset", "-c", str(core % cpus)]  # noqa: E731
    accel = str(build / "accel")
    if log.exists():
        log.unlink()
    t0 = time.perf_counter()
    coord = subprocess.Popen([*pin(0), accel, "coordinator", "svm-train", *args, "--workers", str(workers),
                              "--listen", f"127.0.0.1:{port}", "--log-json", str(log), "--json", "--device", "cpu",
                              "--join-timeout-ms", "60000", str(train), str(model)],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wlogs = [open(log.with_suffix(f".worker{w}.err"), "w") for w in range(1, workers + 1)]
    procs = [subprocess.Popen([*pin(w), accel, "worker", "--coordinator", f"127.0.0.1:{port}", "--id", str(w),
                               "--device", "cpu"], env=env, stdout=subprocess.DEVNULL, stderr=wlogs[w - 1])
             for w in range(1, workers + 1)]
    try:
        try:
            out, err = coord.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            kill(coord)
            raise RunError(f"coordinator timed out after {TIMEOUT} s (port {port})")
        wall = time.perf_counter() - t0
        for p in procs:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                kill(p)
    finally:
        for p in procs:
            kill(p)
        kill(coord)
        for f in wlogs:
            f.close()
    if coord.returncode != 0:
        raise RunError(f"coordinator exit {coord.returncode}: {err.strip()[-800:]}")
    s = json.loads(out.strip().splitlines()[0])
    sec = s.get("seconds", {})
    return {"fit": sec.get("job", sec.get("total")), "wall": wall,
            "obj": [p.get("obj") for p in s.get("problems", [])], "json": s}


def run_case(build, name, repeat, outdir):
    """Runs one case `repeat` times; keeps the first run's model as outdir/NAME.model."""
    datafile, args, kind = CASES[name]
    train = DATA / datafile
    outdir.mkdir(parents=True, exist_ok=True)
    keep = outdir / f"{name}.model"
    scratch = outdir / f"{name}.scratch.model"
    runs = []
    for i in range(repeat):
        model = keep if i == 0 else scratch
        if kind == "single":
            r = run_single(build, train, model, args)
        else:
            r = run_dist(build, train, model, args, kind[1], outdir / f"{name}.jsonl")
        runs.append(r)
        print(f"    {name} run {i + 1}: solver {r['fit']:.3f} s, wall {r['wall']:.3f} s", flush=True)
    if scratch.exists():
        scratch.unlink()
    return {"case": name, "fit": statistics.median(r["fit"] for r in runs),
            "wall": statistics.median(r["wall"] for r in runs),
            "fits": [r["fit"] for r in runs], "walls": [r["wall"] for r in runs],
            "obj": runs[0]["obj"], "first_json": runs[0]["json"], "model": str(keep)}


def run_build(label, build, cases, repeat, outdir, previous=None):
    results = dict(previous or {})
    for name in cases:
        if name in results:
            continue
        print(f"  [{label}] {name}", flush=True)
        try:
            results[name] = run_case(build, name, repeat, outdir)
        except RunError as e:
            print(f"  [{label}] {name} FAILED: {e}", flush=True)
            results[name] = {"case": name, "error": str(e)}
    return results


# ---------------------------------------------------------------- report
def rel_obj_diff(a, b):
    if not a or not b or len(a) != len(b) or any(v is None for v in a + b):
        return None
    return max(abs(x - y) / max(abs(x), 1e-300) for x, y in zip(a, b))


def sv_set(model):
    lines = Path(model).read_text().splitlines()
    return {" ".join(t for t in l.split() if ":" in t) for l in lines[lines.index("SV") + 1:]}


def files_equal(a, b):
    a, b = Path(a), Path(b)
    if not a.exists() or not b.exists():
        return False
    return a.read_bytes() == b.read_bytes()


def table(cases, base, new):
    rows = []
    hdr = f"{'case':<12}{'base s':>9}{'new s':>9}{'ratio':>7}{'base wall':>10}{'new wall':>9}{'ratio':>7}  model"
    print("\n" + hdr)
    print("-" * len(hdr))
    worst = 0
    for name in cases:
        b = base.get(name, {})
        n = (new or {}).get(name, {}) if new is not None else None
        if "error" in b or not b:
            print(f"{name:<12}  base FAILED: {b.get('error', 'missing')[:100]}")
            worst = 2
            continue
        if n is None:
            print(f"{name:<12}{b['fit']:>9.3f}{'-':>9}{'-':>7}{b['wall']:>10.3f}{'-':>9}{'-':>7}"
                  f"  obj {', '.join('%.6g' % o for o in b['obj'][:3])}{' ...' if len(b['obj']) > 3 else ''}")
            continue
        if "error" in n or not n:
            print(f"{name:<12}{b['fit']:>9.3f}  new FAILED: {n.get('error', 'missing')[:100]}")
            worst = 2
            continue
        same = files_equal(b["model"], n["model"])
        if same:
            verdict = "identical"
        else:
            d = rel_obj_diff(b["obj"], n["obj"])
            try:
                svd = f", SV diff {len(sv_set(b['model']) ^ sv_set(n['model']))}"
            except (OSError, ValueError):
                svd = ""
            verdict = "DIFFERS" + (f" (max rel obj diff {d:.2e}{svd})" if d is not None else f" (obj n/a{svd})")
            worst = max(worst, 1)
        print(f"{name:<12}{b['fit']:>9.3f}{n['fit']:>9.3f}{n['fit'] / b['fit']:>7.2f}"
              f"{b['wall']:>10.3f}{n['wall']:>9.3f}{n['wall'] / b['wall']:>7.2f}  {verdict}")
        rows.append(name)
    print("(seconds: medians; solver = svm-train --json seconds.total, coordinator seconds.job; ratio = new/base)")
    return worst


def main():
    global TIMEOUT
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True, type=Path)
    ap.add_argument("--new", type=Path)
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--reuse-base", action="store_true",
                    help="read the base results from WORK/base_results instead of rerunning base")
    ap.add_argument("--timeout", type=int, default=TIMEOUT, help="seconds per process (default 300)")
    ap.add_argument("--out", type=Path, default=ROOT / "new_results", help="where the new build's models go")
    args = ap.parse_args()
    TIMEOUT = args.timeout
    for b in [args.base] + ([args.new] if args.new else []):
        if not (b / "accel").exists():
            sys.exit(f"{b}/accel not found")
    prepare_data()
    print(f"host: {os.cpu_count()} CPUs; repeat {args.repeat}; cases {' '.join(args.cases)}", flush=True)

    results_file = BASE_RESULTS / "results.json"
    previous = {}
    if args.reuse_base:
        if not results_file.exists():
            sys.exit(f"--reuse-base: {results_file} not found")
        saved = json.loads(results_file.read_text())
        if Path(saved.get("build", "")) != args.base.resolve():
            print(f"note: saved base results are of {saved.get('build')}", flush=True)
        previous = {k: v for k, v in saved["results"].items() if "error" not in v}
        print(f"reusing base results of {saved.get('date')} (repeat {saved.get('repeat')}) for "
              f"{' '.join(c for c in args.cases if c in previous) or 'none'}", flush=True)
    base = run_build("base", args.base.resolve(), args.cases, args.repeat, BASE_RESULTS, previous)
    # save (merged with whatever was saved before)
    saved_all = json.loads(results_file.read_text())["results"] if results_file.exists() else {}
    ran_now = [c for c in args.cases if c not in previous]
    if ran_now:
        saved_all.update({c: base[c] for c in ran_now})
        BASE_RESULTS.mkdir(parents=True, exist_ok=True)
        results_file.write_text(json.dumps({"build": str(args.base.resolve()), "repeat": args.repeat,
                                            "date": time.strftime("%Y-%m-%d %H:%M:%S"),
                                            "results": saved_all}, indent=1))
    new = None
    if args.new:
        out = args.out
        if out.resolve() == BASE_RESULTS.resolve():
            sys.exit("--out must differ from the base results folder")
        new = run_build("new", args.new.resolve(), args.cases, args.repeat, out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps({"build": str(args.new.resolve()), "repeat": args.repeat,
                                                      "date": time.strftime("%Y-%m-%d %H:%M:%S"),
                                                      "results": new}, indent=1))
    sys.exit(table(args.cases, base, new))


if __name__ == "__main__":
    main()
