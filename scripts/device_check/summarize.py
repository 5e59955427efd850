"""Turns one run of scripts/device_check.sh (its --out folder) into
results.json and results.md: each step's status, accel's kernel times beside
PyTorch's on the same device, and the GPU issue's targets, met or missed.

  python3 summarize.py --dir OUT --seconds S
Exits 1 when a target is missed or a step failed.
"""
import argparse
import glob
import json
import os
import re


def load(path, default=None):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def last_json(path):
    """The last line of a log that parses as a JSON object."""
    try:
        lines = open(path, errors="replace").read().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    return None


def bench_seconds(bench, kernel, device_prefix):
    for r in (bench or {}).get("results", []):
        if r["kernel"] == kernel and r["device"].startswith(device_prefix):
            return r
    return None


def gtest_counts(path):
    g = load(path)
    if not g:
        return None
    return {"tests": g.get("tests", 0), "failures": g.get("failures", 0), "disabled": g.get("disabled", 0),
            "skipped": sum(1 for s in g.get("testsuites", []) for t in s.get("testsuite", [])
                           if t.get("result") == "SKIPPED")}


def memcheck_errors(logdir):
    out = {}
    for path in sorted(glob.glob(os.path.join(logdir, "memcheck_*.log"))):
        text = open(path, errors="replace").read()
        m = re.findall(r"ERROR SUMMARY: (\d+) error", text)
        out[os.path.basename(path)[len("memcheck_"):-4]] = int(m[-1]) if m else None
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    p.add_argument("--seconds", type=float, default=0)
    a = p.parse_args()
    d = a.dir
    logs = os.path.join(d, "logs")
    machine = load(os.path.join(d, "machine.json"), {})
    manifest = load(os.path.join(d, "kit-manifest.json"), {})
    steps = [json.loads(l) for l in open(os.path.join(d, "steps.jsonl")) if l.strip()]
    dev = "cpu" if machine.get("cpu_only") else "cuda"
    res = {"machine": machine, "seconds": a.seconds, "kit_bytes": manifest.get("kit_bytes"),
           "kit_commit": manifest.get("commit"), "steps": steps, "targets": []}

    def target(name, value, goal, met):
        res["targets"].append({"target": name, "measured": value, "goal": goal,
                               "met": None if met is None else bool(met)})

    # Conformance and memcheck.
    conf = {os.path.basename(f)[:-5]: gtest_counts(f) for f in sorted(glob.glob(os.path.join(d, "conformance_*.json")))}
    res["conformance"] = conf
    conf_steps = [s for s in steps if s["step"].startswith("conformance_")]
    conf_ok = bool(conf_steps) and all(s["rc"] == 0 for s in conf_steps)
    target(f"every conformance case passes on {dev}",
           {k: f"{v['tests'] - v['failures']}/{v['tests']}" if v else "no result" for k, v in conf.items()},
           "all", conf_ok)
    if dev == "cuda":
        mc = memcheck_errors(logs)
        res["memcheck"] = mc
        known = [v for v in mc.values() if v is not None]
        target("compute-sanitizer memcheck errors", mc, 0,
               bool(mc) and len(known) == len(mc) and sum(known) == 0)

    # Kernels against the cpu and against PyTorch.
    fm = last_json(os.path.join(logs, "bench_fmnist.log"))
    km = last_json(os.path.join(logs, "bench_kmeans_1m.log"))
    tk = last_json(os.path.join(logs, "bench_topk_256m.log"))
    peers = load(os.path.join(d, "peers.json"), {})
    res["bench"] = {"fashion_mnist": fm, "kmeans_1m": km, "topk_256m": tk}
    res["peers"] = peers
    rows = []  # the markdown table: what, accel, torch, ratio

    def versus(what, accel_s, torch_s):
        ratio = torch_s / accel_s if accel_s and torch_s else None
        rows.append((what, accel_s, torch_s, ratio))
        return ratio

    pk = {k["data"]: k for k in peers.get("kmeans", [])}
    r = bench_seconds(fm, "kmeans_assign", dev)
    if r and "fashion-mnist" in pk:
        versus(f"k-means step, Fashion-MNIST {fm['kmeans_rows']} x {fm['kmeans_dim']}, K = {fm['k']}",
               r["seconds"], pk["fashion-mnist"]["torch_step_seconds"])
    r = bench_seconds(km, "kmeans_assign", dev)
    if r and "blobs" in pk:
        ratio = versus(f"k-means step, {km['kmeans_rows']} x {km['kmeans_dim']}, K = {km['k']}", r["seconds"],
                       pk["blobs"]["torch_step_seconds"])
        if dev == "cuda":
            target("k-means step at K = 1024, d = 128: PyTorch's time / accel's", ratio, ">= 1.0",
                   ratio is not None and ratio >= 1.0)
    r = bench_seconds(fm, "csr_kernel_rows", dev)
    if r and peers.get("csr_rbf"):
        versus(f"RBF kernel rows, 64 queries x {peers['csr_rbf']['rows']} CSR rows", r["seconds"],
               peers["csr_rbf"]["torch_seconds"])
    by_n = {t["n"]: t for t in peers.get("topk", [])}
    r = bench_seconds(tk, "topk_histogram", dev)
    if r and tk and tk.get("floats") in by_n:
        t = by_n[tk["floats"]]
        ratio = versus(f"top-k 0.1% of {tk['floats']} floats: accel's histogram pass vs torch.topk",
                       r["seconds"], t["torch_topk_seconds"])
        frac = (4 * tk["floats"] / r["seconds"]) / t["read_bytes_per_second"]
        res["topk_read_fraction"] = frac
        res["topk_first_pass"] = {"seconds": r["seconds"], "read_fraction": frac}
    for t in peers.get("topk", []):
        for method in ("exact", "ldte_hist"):
            if f"accel_{method}_seconds" in t:
                ratio = versus(f"top-k 0.1% of {t['n']} floats on the device: accel.topk ({method}, "
                               f"{t.get(f'accel_{method}_passes')} pass) vs torch.topk",
                               t[f"accel_{method}_seconds"], t["torch_topk_seconds"])
                if dev == "cuda" and t["n"] == 1 << 28:
                    target(f"top-k at 256M floats ({method}): torch.topk's time / accel's", ratio, ">= 0.5 (within 2x)",
                           ratio is not None and ratio >= 0.5)
                    frac = (4 * t["n"] / t[f"accel_{method}_seconds"]) / t["read_bytes_per_second"]
                    target(f"top-k at 256M floats ({method}): fraction of the card's read rate", frac, ">= 0.5",
                           frac >= 0.5)
        if "accel_exact_equals_torch" in t:
            target(f"accel.topk exact = torch.topk's set at {t['n']} floats", t["accel_exact_equals_torch"], "true",
                   t["accel_exact_equals_torch"])
    for name in ("topk_cli_16m", "topk_cli_256m"):
        j = last_json(os.path.join(logs, name + ".log"))
        if j and j.get("n") in by_n:
            versus(f"top-k 0.1% of {j['n']} floats, `accel topk` end to end (host input, copied each call)",
                   j.get("seconds"), by_n[j["n"]]["torch_topk_seconds"])
    res["versus_torch"] = [{"what": w, "accel_seconds": x, "torch_seconds": y, "torch_over_accel": z}
                           for w, x, y, z in rows]

    # The DDP hook.
    ddp = load(os.path.join(d, "ddp.json"), {})
    res["ddp"] = ddp
    eq = ddp.get("equal", {})
    target(f"DDP hook on {dev} tensors equals the CPU path (max |difference|)",
           eq.get("max_abs_difference"), "within float rounding (<= 1e-6)",
           bool(eq) and not ddp.get("failures"))
    target("kit size (MiB)", round((manifest.get("kit_bytes") or 0) / 2 ** 20, 1), "<= 60",
           (manifest.get("kit_bytes") or 1e12) <= 60 * 2 ** 20)
    target("the whole check (s)", round(a.seconds), "<= 480", a.seconds <= 480)
    failed_steps = [s["step"] for s in steps if s.get("rc") not in (0,)]
    res["failed_steps"] = failed_steps

    with open(os.path.join(d, "results.json"), "w") as f:
        json.dump(res, f, indent=1)
    md = [f"# GPU check: {machine.get('gpu', '?')}", "",
          f"{machine.get('date', '')}, host {machine.get('host_cpu', '?')} ({machine.get('cores', '?')} cores), "
          f"glibc {machine.get('glibc', '?')}, kit {manifest.get('commit', '?')}, check {a.seconds:.0f} s", "",
          "| step | rc | seconds |", "|---|---|---|"]
    md += [f"| {s['step']} | {s.get('rc')} | {s.get('seconds')} |" + (f" {s['skipped']}" if s.get("skipped") else "")
           + (f" {s['how']}" if s.get("how") else "") for s in steps]
    md += ["", "| work | accel (s) | PyTorch (s) | PyTorch / accel |", "|---|---|---|---|"]
    fmt = lambda v: "-" if v is None else f"{v:.4g}"
    md += [f"| {w} | {fmt(x)} | {fmt(y)} | {fmt(z)} |" for w, x, y, z in rows]
    md += ["", "| target | measured | goal | met |", "|---|---|---|---|"]
    md += [f"| {t['target']} | {json.dumps(t['measured'])} | {t['goal']} | "
           f"{'yes' if t['met'] else 'no' if t['met'] is False else '-'} |" for t in res["targets"]]
    with open(os.path.join(d, "results.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))
    missed = [t for t in res["targets"] if t["met"] is False]
    return 1 if missed or failed_steps else 0


if __name__ == "__main__":
    raise SystemExit(main())
