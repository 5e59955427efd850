#!/usr/bin/env python3
"""Distributed SVM scenarios on loopback (stdlib only, bounded in time).

    cluster_svm_test.py SCENARIO --accel BIN --intruder BIN --scripts DIR

Every scenario trains across workers (accel coordinator svm-train) and
checks the model against single-node accel svm-train on the same data:
every dual objective within 1e-6 relative and the same support vectors,
failures or not. Exit 0 pass, 1 fail, 77 skipped (reason printed).
"""
import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cluster_test as ct  # noqa: E402  (fail, skip, jsonl, free_port, check_no_stall)
from cluster_test import fail, jsonl  # noqa: E402

PARAMS = ["-c", "10", "-g", "0.05", "--ws-size", "32"]


def libsvm(path, n, d, classes, seed, density=0.8):
    rng = random.Random(seed)
    centers = [[rng.uniform(-1, 1) for _ in range(d)] for _ in range(classes)]
    with open(path, "w") as f:
        for i in range(n):
            c = i % classes
            feats = [f"{j + 1}:{centers[c][j] + rng.gauss(0, 1.2):.4f}" for j in range(d) if rng.random() < density]
            f.write(f"{c + 1} " + " ".join(feats) + "\n")


def support_vectors(model):
    """A model's support vectors: each one's features -> its coefficients."""
    lines = Path(model).read_text().splitlines()
    out = {}
    for line in lines[lines.index("SV") + 1:]:
        t = line.split()
        out[" ".join(x for x in t if ":" in x)] = [float(x) for x in t if ":" not in x]
    return out


def cost(params):
    """-c of svm-train's options (LIBSVM's default 1)."""
    return float(params[params.index("-c") + 1]) if "-c" in params else 1.0


def differing_support_vectors(what, mine, svs, c):
    """How many support vectors are in one of two models only (mine, and
    single-node's svs), held to docs/cluster.md's bound: at most 0.1% of
    single-node's or 3, whichever is more, and every one borderline, its
    multipliers under 1% of C in the model that has it (measured: under
    1e-4 of C). A lost or twice-counted row would leave a multiplier far
    from 0, or many support vectors apart."""
    apart = set(mine) ^ set(svs)
    worst = max((abs(v) for sv in apart for v in (mine.get(sv) or svs[sv])), default=0.0)
    if len(apart) > max(3, 0.001 * len(svs)) or worst > 0.01 * c:
        fail(f"{what}: {len(apart)} support vectors differ from single-node's {len(svs)}, "
             f"the largest multiplier among them {worst:.3g} (C = {c:g})")
    return len(apart)


def single_node(a, tmp, data, params):
    """Single-node svm-train's objectives and support vectors, computed once
    per build for the same data and parameters (ct.kept_reference)."""
    model = Path(tmp) / "single.model"  # predictions_agree reads it
    kept = ct.kept_reference(a, data, ["svm-train", *params], ".model")
    kept_json = kept.with_suffix(".json") if kept else None
    if kept and kept.exists() and kept_json.exists():
        shutil.copyfile(kept, model)
        return json.loads(kept_json.read_text()), support_vectors(model)
    r = subprocess.run([a.accel, "svm-train", *params, "--json", data, str(model)], capture_output=True, text=True,
                       timeout=300)
    if r.returncode != 0:
        fail("single-node svm-train failed: " + r.stderr)
    problems = json.loads(r.stdout)["problems"]
    if kept:  # the model first: a result is kept once both are
        ct.keep(kept, model)
        (Path(tmp) / "single.json").write_text(json.dumps(problems))
        ct.keep(kept_json, Path(tmp) / "single.json")
    return problems, support_vectors(model)


def check_model(job, reference, what, exact=False):
    """What docs/cluster.md says of a distributed model: every objective within
    1e-6 relative of single-node's, and the support vectors single-node's
    but for a few borderline ones (differing_support_vectors). The gemm
    path's sgemm rounds a dot product by the shape of the call its rows
    fall in, so a member's kernel values differ from single-node's in the
    last bits (measured without failures: 0 to 2 of 1,716); after a failure
    the moved rows' gradients are rebuilt from the multipliers (Alg. 6), a
    sum in another order than the failure-free updates (measured: 0 to 3 of
    6,644). exact: the job ran with ACCEL_CSR_DOT=scatter, whose sums do
    not depend on the rows a matrix holds, and the model must be
    single-node's, objectives bit for bit."""
    probs, svs = reference
    s = job.summary()
    got = s["problems"]
    if len(got) != len(probs):
        fail(f"{what}: {len(got)} problems, single-node {len(probs)}")
    worst = max(abs(g["obj"] - p["obj"]) / abs(p["obj"]) for g, p in zip(got, probs))
    if worst > (0 if exact else 1e-6):
        fail(f"{what}: objective {worst:.2e} relative off single-node")
    mine = support_vectors(job.model)
    if exact and mine.keys() != svs.keys():
        fail(f"{what}: {len(set(mine) ^ set(svs))} support vectors differ from single-node's {len(svs)}")
    differ = differing_support_vectors(what, mine, svs, cost(job.params))
    print(f"{what}: {len(got)} problems, objectives within {worst:.1e} of single-node, "
          f"{differ} of {len(svs)} support vectors differ")


class SvmJob:
    def __init__(self, a, tmp, workers, data, params, timeout_ms=1000, worker_extra=(), pin=False, extra=(),
                 worker_env=None, worker_env_of=None, prefix_of=None):
        self.a, self.tmp, self.n, self.params = a, Path(tmp), workers, params
        self.tmp.mkdir(parents=True, exist_ok=True)
        timeout_ms = int(timeout_ms * ct.SCALE)
        self.timeout_ms = timeout_ms
        self.worker_extra = list(worker_extra)
        self.worker_env = worker_env  # environment added for the workers
        self.worker_env_of = worker_env_of or {}  # ... and for one of them
        self.prefix_of = prefix_of or {}  # a command a worker runs under (a namespace)
        self.model = str(self.tmp / "dist.model")
        self.coord_log = self.tmp / "coordinator.jsonl"
        self.procs = {}
        self.pin = pin  # coordinator on core 0, worker i on core i (mod cores)
        self.coord_cmd = (["taskset", "-c", "0"] if pin else []) + [
            a.accel, "coordinator", "svm-train", *params, "--workers", str(workers), "--listen", "127.0.0.1:0",
            "--timeout-ms", str(timeout_ms), "--keepalive-ms", str(int(2000 * ct.SCALE)), "--log-json",
            str(self.coord_log), "--json", *extra, data, self.model]
        self.start_coordinator()
        for i in range(1, workers + 1):
            self.start_worker(i)

    def start_coordinator(self, extra=()):
        """The coordinator, with `extra` options (a restart: --resume DIR)."""
        err = self.tmp / "coordinator.err"
        said = err.read_text().count("listening") if err.exists() else 0
        self.coord = ct.start(self.coord_cmd[:-2] + list(extra) + self.coord_cmd[-2:],
                              stdout=open(self.tmp / "coordinator.out", "w"), stderr=open(err, "a"))
        self.wait_for(lambda: err.read_text().count("listening") > said, 20, "the coordinator to listen")
        self.port = ct.listening_port(err)

    def start_worker(self, i, with_id=True):
        # with_id=False: a worker that joins without --id; `i` names its files.
        cmd = self.prefix_of.get(i, []) + (["taskset", "-c", str(i % os.cpu_count())] if self.pin else []) + [self.a.accel, "worker", "--coordinator", f"127.0.0.1:{self.port}", *(["--id", str(i)] if with_id else []), "--device", "cpu",
               "--timeout-ms", str(self.timeout_ms), "--keepalive-ms", str(int(2000 * ct.SCALE)), "--snapshot-dir",
               str(self.tmp / "snapshots"), "--log-json", str(self.tmp / f"worker-{i}.jsonl"), *self.worker_extra]
        extra_env = {**(self.worker_env or {}), **self.worker_env_of.get(i, {})}
        env = {**os.environ, **extra_env} if extra_env else None
        self.procs[i] = ct.start(cmd, stdout=open(self.tmp / f"worker-{i}.out", "a"),
                                 stderr=open(self.tmp / f"worker-{i}.err", "a"), env=env)

    def round(self):
        return sum(1 for j in jsonl(self.coord_log) if j.get("participant") == 0)

    def wait_for(self, pred, seconds, what):
        end = time.time() + seconds * ct.SCALE
        while time.time() < end:
            if pred():
                return
            if self.coord.poll() is not None:
                break
            time.sleep(0.005)
        if not pred():
            self.kill_all()
            fail(f"timed out waiting for {what}")

    def wait_round(self, t, seconds=60):
        self.wait_for(lambda: self.round() >= t, seconds, f"round {t}")

    def wait_event(self, who, event, seconds=60, **fields):
        log = self.coord_log if who == 0 else self.tmp / f"worker-{who}.jsonl"
        self.wait_for(lambda: any(j.get("event") == event and all(j.get(k) == v for k, v in fields.items())
                                  for j in jsonl(log)), seconds, f"{event} of {who}")

    def kill(self, i):
        self.procs[i].send_signal(signal.SIGKILL)
        self.procs[i].wait()

    def finish(self, seconds=240):
        try:
            rc = self.coord.wait(timeout=seconds * ct.SCALE)
        except subprocess.TimeoutExpired:
            self.kill_all()
            fail("the coordinator did not finish in time")
        for i, p in self.procs.items():
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                fail(f"worker {i} did not exit after the job")
        if rc != 0:
            fail(f"coordinator exit {rc}: " + (self.tmp / "coordinator.err").read_text()[-800:])
        return rc

    def kill_all(self):
        for p in [self.coord, *self.procs.values()]:
            if p.poll() is None:
                p.kill()

    def logs(self):
        out = {0: jsonl(self.coord_log)}
        for i in range(1, self.n + 1):
            out[i] = jsonl(self.tmp / f"worker-{i}.jsonl")
        return out

    def summary(self):
        return json.loads((self.tmp / "coordinator.out").read_text().splitlines()[0])


def long_data(tmp):
    """Two classes that take the solver about 2,300 rounds (at --ws-size
    32): room for a kill at round 200, a restart 200 rounds later and the
    rejoin. 10,000 rows of 20 features ran in half the time, but with 3,414
    support vectors against 6,643 here check_model's 0.1% bound is 3, and a
    recovery left 4 borderline ones apart (cluster.svm_sigstop)."""
    data = str(Path(tmp) / "long.train")
    libsvm(data, 16000, 30, 2, 1)
    return data


def scenario_svm_equal(a, tmp):
    data = str(Path(tmp) / "three.train")
    libsvm(data, 3000, 20, 3, 2)
    params = PARAMS + ["-h", "1", "--shrink", "multi2"]
    # With the default dot path (sgemm on this dense data) the model is
    # single-node's to the documented bound; with ACCEL_CSR_DOT=scatter,
    # exactly, on any number of workers.
    for dot, runs in (("scatter", (1, 2, 3)), ("auto", (3,))):
        os.environ["ACCEL_CSR_DOT"] = dot
        ref = single_node(a, tmp, data, params)
        for workers in runs:
            job = SvmJob(a, Path(tmp) / f"{dot}-w{workers}", workers, data, params)
            job.finish()
            check_model(job, ref, f"ACCEL_CSR_DOT={dot}, {workers} worker(s)", exact=dot == "scatter")
            s = job.summary()
            if s["members"]["active"] != list(range(workers + 1)) or s["rows_moved"] != 0:
                fail(f"unexpected membership or moves without failures: {s['members']} {s['rows_moved']}")
    del os.environ["ACCEL_CSR_DOT"]


def scenario_svm_pull(a, tmp):
    # --pull: every member reads the training file, so each reads only the
    # rows it owns; the working set's rows and the support vectors' for a
    # reconstruction travel through the coordinator. Without failures the
    # model is single-node's; then worker 2 is killed -9 and not restarted:
    # a survivor reads its rows from the file and rebuilds their gradients
    # from the support vectors' rows, fetched from their owners.
    three = str(Path(tmp) / "three.train")
    libsvm(three, 3000, 20, 3, 2)
    params = PARAMS + ["-h", "1", "--shrink", "multi2"]
    job = SvmJob(a, Path(tmp) / "equal", 3, three, params, extra=["--pull"])
    job.finish()
    # To check_model's bound: sgemm rounds by tile (cluster.svm_equal checks
    # ACCEL_CSR_DOT=scatter exactly).
    check_model(job, single_node(a, tmp, three, params), "3 workers, --pull")
    if job.summary()["rows_moved"] != 0:
        fail("rows moved without failures")
    data = long_data(tmp)
    pull_kill_check(a, tmp, data, data, "3 workers, --pull, worker 2 killed")


def pull_kill_check(a, tmp, data, given, what):
    """3 workers with --pull on `given` (the data, or its part files), worker
    2 killed -9 at round 200 and not restarted: its rows move, and the model
    is single-node's on `data`."""
    params = PARAMS + ["--shrink", "multi2"]
    ref = single_node(a, tmp, data, params)
    job = SvmJob(a, Path(tmp) / "kill", 3, given, params, extra=["--pull"])
    job.wait_round(200)
    job.kill(2)
    print(f"killed worker 2 at round {job.round()}")
    job.finish()
    if job.summary()["rows_moved"] < 1:
        fail("worker 2's rows did not move")
    check_model(job, ref, what)


def split_parts(data, directory, cuts):
    """data's rows into part files cut at `cuts` (an empty part where two
    cuts meet); the part before the last ends without a newline."""
    lines = Path(data).read_text().splitlines(keepends=True)
    Path(directory).mkdir()
    for k in range(len(cuts) - 1):
        text = "".join(lines[cuts[k]:cuts[k + 1]])
        if k == len(cuts) - 3:
            text = text.rstrip("\n")
        (Path(directory) / f"part-{k:05d}").write_text(text)
    return str(Path(directory) / "part-*")


def scenario_svm_parts(a, tmp):
    # Training files given as part files (a glob): single-node svm-train,
    # pushed members (the coordinator joins the parts' bytes), --pull
    # members that read their rows from the parts that hold them (a worker
    # killed -9: a survivor reads its rows from the parts), and -b 1 with
    # --pull (every member reads the joined parts). Each model is the one of
    # the same rows in one file.
    three = str(Path(tmp) / "three.train")
    libsvm(three, 3000, 20, 3, 2)
    glob = split_parts(three, Path(tmp) / "three", [0, 1000, 1000, 1001, 3000])
    params = PARAMS + ["-h", "1", "--shrink", "multi2"]
    ref = single_node(a, tmp, three, params)
    if single_node(a, tmp, glob, params) != ref:
        fail("single-node svm-train on the parts differs from the one file")
    # Failure-free, held to check_model's bound: sgemm rounds by tile.
    job = SvmJob(a, Path(tmp) / "pushed", 3, glob, params)
    job.finish()
    check_model(job, ref, "3 workers, part files pushed")
    b1 = params + ["-b", "1"]
    job = SvmJob(a, Path(tmp) / "b1", 2, glob, b1, extra=["--pull"])
    job.finish()
    check_model(job, single_node(a, tmp, three, b1), "-b 1, 2 workers, --pull on part files")
    data = long_data(tmp)
    glob = split_parts(data, Path(tmp) / "long", [0, 4097, 4097, 9000, 9001, 16000])
    pull_kill_check(a, tmp, data, glob, "3 workers, --pull on part files, worker 2 killed")


def scenario_svm_pull_other_file(a, tmp):
    # --pull, and worker 2 sees another file at the training file's path
    # (its own mount namespace puts a shorter copy there): it computes
    # nothing on those bytes, exits 2 with one line naming itself and the
    # file, and the coordinator ends the job the same way, writing no model.
    if os.geteuid() != 0 or not shutil.which("unshare"):
        ct.skip("needs root and unshare for a mount namespace")
    data_dir = Path(tmp) / "data"
    data_dir.mkdir()
    data = str(data_dir / "long.train")
    libsvm(data, 4000, 30, 2, 1)
    other = Path(tmp) / "other"
    other.mkdir()
    lines = Path(data).read_text().splitlines(keepends=True)
    (other / "long.train").write_text("".join(lines[:3000]))
    hide = ["unshare", "--mount", "sh", "-c", f'mount --bind "{other}" "{data_dir}" && exec "$0" "$@"']
    if subprocess.run([*hide, "true"], capture_output=True).returncode != 0:
        ct.skip("no mount namespace here (unshare --mount and mount need CAP_SYS_ADMIN)")
    job = SvmJob(a, Path(tmp) / "run", 3, data, PARAMS, extra=["--pull"], prefix_of={2: hide})
    code = job.procs[2].wait(timeout=60 * ct.SCALE)
    said = [l for l in (job.tmp / "worker-2.err").read_text().splitlines() if l.strip()]
    if code != 2 or not said or "worker 2" not in said[-1] or "long.train" not in said[-1]:
        fail(f"worker 2 with another file: exit {code}, {said[-3:]}")
    try:
        rc = job.coord.wait(timeout=60 * ct.SCALE)
    except subprocess.TimeoutExpired:
        job.kill_all()
        fail("the coordinator did not end the job")
    err = [l for l in (job.tmp / "coordinator.err").read_text().splitlines()
           if l.strip() and "listening" not in l and "token" not in l]
    if rc != 2 or len(err) != 1 or "worker 2" not in err[0] or "long.train" not in err[0]:
        fail(f"the coordinator: exit {rc}, {err}")
    if Path(job.model).exists():
        fail("the coordinator wrote a model of a job that did not run")
    print(f"worker 2: {said[-1]} (exit 2); the coordinator: {err[0]} (exit 2)")


def scenario_svm_kill_restart(a, tmp, pull=()):
    data = long_data(tmp)
    ref = single_node(a, tmp, data, PARAMS)
    job = SvmJob(a, Path(tmp) / "run", 3, data, PARAMS, extra=pull)
    job.wait_round(200)
    job.wait_event(2, "snapshot", 30)
    job.kill(2)
    killed_at = job.round()
    job.wait_round(killed_at + 200)
    job.start_worker(2)
    print(f"killed worker 2 at round {killed_at}, restarted it at round {job.round()}")
    job.finish()
    ct.check_recovery(job)
    logs = job.logs()
    if not any(j.get("event") == "resumed" for j in logs[2]):
        fail("worker 2 did not resume from its snapshot")
    if not any(j.get("event") == "resynchronized" and j.get("worker") == 2 for j in logs[0]):
        fail("worker 2 did not rejoin")
    s = job.summary()
    if s["rows_moved"] < 2:
        fail(f"worker 2's rows did not move away and back: rows_moved {s['rows_moved']}")
    check_model(job, ref, "worker 2 killed and restarted")
    ct.check_no_stall(job, {0, 1, 3}, slack=2.0)


def scenario_svm_sigterm_leave(a, tmp):
    # SIGTERM: worker 2 leaves at a round boundary; its rows move to a
    # surviving worker without an eviction, it exits 0, and the model is the
    # single-node one.
    data = long_data(tmp)
    ref = single_node(a, tmp, data, PARAMS)
    job = SvmJob(a, Path(tmp) / "run", 3, data, PARAMS)
    job.wait_round(200)
    ct.leave_on_sigterm(job.procs[2], "worker 2", 30)
    job.finish()
    logs = job.logs()
    left = [j for j in logs[0] if j.get("event") == "left"]
    if not left:
        fail("no leave in the coordinator's log")
    # The leave must not wait out a timeout: worker 2 never evicted, nor
    # anyone in the rounds around its leave. (The job runs thousands of
    # 1 s-timeout rounds: on a loaded host an unrelated stall can evict a
    # member far from the leave, which says nothing of it; the model check
    # below still holds then.)
    at = left[0]["iteration"]
    evicted = [(j["iteration"], j["evicted"]) for j in logs[0] if j.get("participant") == 0 and j.get("evicted")
               and (2 in j["evicted"] or at - 5 <= j["iteration"] <= at + 5)]
    if evicted:
        fail(f"members were evicted (round, ids) {evicted}: the leave at round {at} waited out a timeout")
    if job.summary()["rows_moved"] < 1:
        fail("worker 2's rows did not move")
    print(f"worker 2 left at round {left[0]['iteration']}")
    check_model(job, ref, "worker 2 left")


def scenario_svm_elastic(a, tmp, pull=()):
    # A job of 2 workers (--max-workers 3) that a third joins mid-job without
    # an id: it gets id 3, and a re-split gives it rows within 10 rounds of
    # its first report (pushed, every worker holds the training set, so the
    # rows move as an assignment; with --pull it reads them). Then worker 1
    # is sent SIGTERM and leaves
    # without an eviction. The model is single-node's.
    data = long_data(tmp)
    ref = single_node(a, tmp, data, PARAMS)
    job = SvmJob(a, Path(tmp) / "run", 2, data, PARAMS, extra=["--max-workers", "3", *pull])
    job.wait_round(200)
    job.start_worker(3, with_id=False)
    job.wait_event(0, "resynchronized", 60, worker=3)
    rounds = [j for j in jsonl(job.coord_log) if j.get("participant") == 0]
    joined = next((j["iteration"] for j in rounds if 3 in j["members"]["active"]), None)
    job.wait_for(lambda: "3:0->" in (job.tmp / "coordinator.err").read_text(), 60, "rows for worker 3")
    job.wait_round(job.round() + 50)
    ct.leave_on_sigterm(job.procs[1], "worker 1", 30)
    job.finish()
    rounds = [j for j in jsonl(job.coord_log) if j.get("participant") == 0]
    joined = joined or next(j["iteration"] for j in rounds if 3 in j["members"]["active"])
    gave = next((j["iteration"] for j in rounds if "5" in str(j.get("ops", "")).split(",") and j["iteration"] >= joined),
                None)
    if gave is None or gave > joined + 10:
        fail(f"worker 3 counts from round {joined} but got rows at {gave}")
    left = [j for j in jsonl(job.coord_log) if j.get("event") == "left" and j.get("worker") == 1]
    if not left:
        fail("worker 1 did not leave")
    # Neither the join nor the leave waited out a timeout: the joiner and the
    # leaver never evicted, nor anyone around either (as in svm_sigterm_leave).
    near = [joined, left[0]["iteration"]]
    evicted = [(j["iteration"], j["evicted"]) for j in rounds if j.get("evicted")
               and (1 in j["evicted"] or 3 in j["evicted"] or any(t - 5 <= j["iteration"] <= t + 5 for t in near))]
    if evicted:
        fail(f"members were evicted (round, ids) {evicted}")
    print(f"worker 3 joined without an id, counted from round {joined}, got rows in round {gave}; worker 1 left")
    # The leave's rows have their gradients rebuilt from the multipliers
    # (Alg. 6), as after a failure: borderline support vectors may differ.
    check_model(job, ref, "a worker joined and another left")


def scenario_svm_two_killed(a, tmp):
    # Two workers killed at the same moment (issue 17's overlapping
    # failures), then both restarted: each is handed only the coordinator's
    # address, and the job ends with the failure-free model.
    data = long_data(tmp)
    ref = single_node(a, tmp, data, PARAMS)
    job = SvmJob(a, Path(tmp) / "run", 3, data, PARAMS)
    job.wait_round(200)
    job.wait_event(1, "snapshot", 30)
    job.wait_event(3, "snapshot", 30)
    job.procs[1].send_signal(signal.SIGKILL)
    job.procs[3].send_signal(signal.SIGKILL)
    job.procs[1].wait()
    job.procs[3].wait()
    killed_at = job.round()
    job.wait_round(killed_at + 100)
    job.start_worker(1)
    job.start_worker(3)
    print(f"killed workers 1 and 3 at round {killed_at}, restarted both at round {job.round()}")
    job.finish()
    for w in (1, 3):
        if not any(j.get("event") == "resynchronized" and j.get("worker") == w for j in job.logs()[0]):
            fail(f"worker {w} did not rejoin")
    check_model(job, ref, "workers 1 and 3 killed together")


def scenario_svm_all_lost(a, tmp):
    # Both workers killed -9 and not restarted: the coordinator, which held
    # no rows, reads every row of the training file, restarts the problem
    # from the multipliers and finishes it alone; the model is single-node's.
    data = long_data(tmp)
    ref = single_node(a, tmp, data, PARAMS)
    job = SvmJob(a, Path(tmp) / "run", 2, data, PARAMS)
    job.wait_round(200)
    ct.kill_together(job.procs, (1, 2))
    killed_at = job.round()
    job.finish()
    err = (job.tmp / "coordinator.err").read_text()
    if "reads every row" not in err:
        fail("the coordinator did not say it reads every row: " + err[-600:])
    s = job.summary()
    if s["rows"][0] != 0:
        fail(f"the coordinator owned rows from the start: {s['rows']}")
    print(f"both workers killed at round {killed_at}; the coordinator finished alone")
    check_model(job, ref, "every worker lost")


def scenario_svm_kill_during_move(a, tmp):
    # Worker 2 comes back; the moment the coordinator counts it again (its
    # rows are handed back to it in the next round) it is killed again. The
    # rows go back to the coordinator and the model is unchanged.
    data = long_data(tmp)
    ref = single_node(a, tmp, data, PARAMS)
    job = SvmJob(a, Path(tmp) / "run", 2, data, PARAMS)
    job.wait_round(200)
    job.wait_event(2, "snapshot", 30)
    job.kill(2)
    job.wait_round(job.round() + 100)
    job.start_worker(2)
    err = job.tmp / "coordinator.err"
    job.wait_for(lambda: "moved back to worker 2" in err.read_text(), 60, "worker 2's rows to move back")
    job.kill(2)
    print(f"worker 2 killed again at round {job.round()}, as its rows were being moved back to it")
    job.finish()
    s = job.summary()
    if s["rows_moved"] < 3:
        fail(f"rows did not move: {s['rows_moved']}")
    check_model(job, ref, "killed while its rows moved back")


def scenario_svm_sigstop(a, tmp):
    data = long_data(tmp)
    ref = single_node(a, tmp, data, PARAMS)
    job = SvmJob(a, Path(tmp) / "run", 2, data, PARAMS, timeout_ms=700)
    job.wait_round(200)
    job.wait_event(1, "snapshot", 30)
    job.procs[1].send_signal(signal.SIGSTOP)
    stopped_at = job.round()
    time.sleep(2.5)
    job.procs[1].send_signal(signal.SIGCONT)
    print(f"stopped worker 1 at round {stopped_at} for 2.5 s (timeout 0.7 s)")
    job.finish()
    logs = job.logs()
    if not any(1 in j.get("evicted", []) for j in logs[0]):
        fail("worker 1 was never evicted")
    rejoins = [j for j in logs[0] if j.get("event") == "rejoin" and j["worker"] == 1]
    if not rejoins or rejoins[0]["incarnation"] < 2:
        fail(f"worker 1 did not rejoin with a new incarnation: {rejoins}")
    check_model(job, ref, f"worker 1 stopped, evicted, back as incarnation {rejoins[0]['incarnation']}")


def scenario_svm_rebalance(a, tmp):
    # Two workers, one thread each (the coordinator, which holds no rows,
    # shares core 0 with worker 2; worker 1 has core 1); from its Rows round
    # 40 (counted from 0) worker 1 computes its kernel rows at half speed
    # (ACCEL_FAULT_SLOW_ROWS). It must lose rows (Algorithm 1 of [SysInfo] on the measured rates,
    # DriftPolicy, SwingDamper) and the rounds must get faster again; the
    # model stays single-node's. (A busy process on core 1 slowed these 4 ms
    # rounds by chance: the scheduler lets a process that sleeps between
    # rounds run first, and CI saw no slow streak long enough to act on.)
    if os.cpu_count() < 2 or not shutil.which("taskset"):
        ct.skip("needs 2 cores and taskset")
    data = str(Path(tmp) / "dense.train")
    rng = random.Random(5)
    centers = [[rng.uniform(-1, 1) for _ in range(200)] for _ in range(2)]
    with open(data, "w") as f:
        for i in range(12000):
            c = centers[i % 2]
            f.write(f"{i % 2 + 1} " + " ".join(f"{j + 1}:{c[j] + rng.gauss(0, 3):.3f}" for j in range(200)) + "\n")
    params = ["-c", "10", "-g", "0.005", "--ws-size", "128"]
    ref = single_node(a, tmp, data, params)
    os.environ["OMP_NUM_THREADS"] = "1"
    slow_from = 40
    job = SvmJob(a, Path(tmp) / "run", 2, data, params, timeout_ms=5000, pin=True,
                 worker_env_of={1: {"ACCEL_FAULT_SLOW_ROWS": f"{slow_from}:2"}})
    job.finish()
    err = (job.tmp / "coordinator.err").read_text()
    splits = [l.split("speed:", 1)[1].strip() for l in err.splitlines() if "re-split" in l]
    if not splits:
        fail("the slowed worker kept its rows: no re-split")
    print(f"{len(splits)} re-splits: {'; '.join(splits)}")
    # Solver rounds, timed from Step to Step. Every Assign (op 5) is a
    # re-split here (no member is lost), in the order the coordinator
    # printed them. The slowdown's is the first after the worker's first
    # slowed Rows round (op 7) that takes rows from it; the rounds between
    # are the slowed ones.
    rounds = [j for j in jsonl(job.coord_log) if j.get("participant") == 0]
    steps = [(i, j["t_s"]) for i, j in enumerate(rounds) if j.get("ops") == "2"]
    per = [(i, t1 - t0) for (_, t0), (i, t1) in zip(steps, steps[1:])]
    ops = [str(j.get("ops", "")).split(",") for j in rounds]
    assigns = [i for i, o in enumerate(ops) if "5" in o]
    if len(assigns) != len(splits):
        fail(f"{len(assigns)} Assign rounds but {len(splits)} re-splits printed")
    rows_rounds = [i for i, o in enumerate(ops) if "7" in o]
    if len(rows_rounds) <= slow_from + 20:
        fail(f"only {len(rows_rounds)} Rows rounds: the job ended before the slowdown could be answered")
    slowed_at = rows_rounds[slow_from]
    worker1 = [int(m[1]) - int(m[2]) for m in (re.search(r"(?:^| )1:(\d+)->(\d+)", s) for s in splits)]  # rows lost
    moved = [i for i, lost in zip(assigns, worker1) if i >= slowed_at and lost > 0]
    if not moved:
        fail("no re-split after the slowdown took rows from the slowed worker")
    since = max([slowed_at] + [i for i in assigns if i < moved[0]])
    slowed = [d for i, d in per if since < i < moved[0]]
    after = [d for i, d in per if i > moved[0]][10:40]
    if not slowed or len(after) < 10:
        fail(f"too few rounds to compare: {len(slowed)} slowed, {len(after)} after the re-split")
    before = [d for i, d in per if i < slowed_at][-20:]
    med = lambda v: sorted(v)[len(v) // 2]  # noqa: E731
    print(f"median round: {med(before) * 1e3:.1f} ms before, {med(slowed) * 1e3:.1f} ms slowed "
          f"({len(slowed)} rounds), {med(after) * 1e3:.1f} ms after the re-split")
    if not med(after) < med(slowed):
        fail("the rounds did not get faster after the re-split")
    check_model(job, ref, "a worker slowed to half speed mid-job")


def scenario_svm_coordinator_kill(a, tmp):
    data = long_data(tmp)
    job = SvmJob(a, Path(tmp) / "run", 2, data, PARAMS)
    job.wait_round(100)
    job.coord.send_signal(signal.SIGKILL)
    t0 = time.time()
    for i, p in job.procs.items():
        try:
            rc = p.wait(timeout=job.timeout_ms / 1000 + 10)
        except subprocess.TimeoutExpired:
            job.kill_all()
            fail(f"worker {i} still running {time.time() - t0:.1f} s after the coordinator died")
        err = (job.tmp / f"worker-{i}.err").read_text()
        print(f"worker {i}: exit {rc} after {time.time() - t0:.2f} s: {err.strip().splitlines()[-1] if err.strip() else ''}")
        if rc != 3 or "coordinator" not in err:
            fail(f"worker {i}: exit {rc} without the documented code 3 and message: {err}")


def scenario_svm_coordinator_restart(a, tmp, lose_worker=False, pull=()):
    # kill -9 the coordinator mid-training and restart it with --resume:
    # the workers wait for it (--coordinator-timeout) and rejoin; the
    # problems solved before the checkpoint are taken from it and the one in
    # progress starts again from its multipliers. That warm start converges
    # to the same optimum within the solver's tolerance (-e): docs/cluster.md
    # says within 1e-6 relative, as any distributed model (measured 8e-10 to
    # 1.1e-7), and every training-set prediction the same, and so does this
    # test. lose_worker:
    # worker 2 dies too while the coordinator is down; the resumed
    # coordinator takes its rows until it is restarted and rejoins.
    data = str(Path(tmp) / "three.train")
    libsvm(data, 6000, 20, 3, 2)
    ref = single_node(a, tmp, data, PARAMS)
    ckpt = Path(tmp) / "checkpoint"
    job = SvmJob(a, Path(tmp) / "run", 2, data, PARAMS, extra=["--checkpoint-dir", str(ckpt), "--mtbf", "0.05", *pull],
                 worker_extra=["--coordinator-timeout", str(int(60000 * ct.SCALE))])
    # Into the second of the three problems, past a checkpoint in it.
    job.wait_for(lambda: sum(1 for j in jsonl(job.coord_log) if j.get("ops", "").startswith("1")) >= 2, 120,
                 "the second problem")
    start_round = job.round()
    job.wait_for(lambda: any(j.get("event") == "checkpoint" and j["iteration"] > start_round
                             for j in jsonl(job.coord_log)), 60, "a checkpoint in the second problem")
    if lose_worker:
        job.wait_event(2, "snapshot", 30)
    job.coord.send_signal(signal.SIGKILL)
    job.coord.wait()
    killed_at = job.round()
    if lose_worker:
        job.kill(2)
    saved = [j["iteration"] for j in jsonl(job.coord_log) if j.get("event") == "checkpoint"]
    print(f"killed the coordinator after round {killed_at} (second problem from round {start_round}); "
          f"{len(saved)} checkpoints, the last at round {saved[-1]}")
    time.sleep(1.0)
    job.start_coordinator(["--resume", str(ckpt)])
    back = [1] if lose_worker else [1, 2]
    if lose_worker:
        job.wait_for(lambda: any(j.get("event") == "resumed" for j in jsonl(job.coord_log)), 30, "the resume")
        job.wait_round(killed_at + int(os.environ.get("T_WAIT", "100")))
        job.start_worker(2)
    job.finish()
    for i, p in job.procs.items():
        if p.returncode != 0:
            fail(f"worker {i} exited {p.returncode}: " + (job.tmp / f"worker-{i}.err").read_text()[-400:])
    resumed = [j for j in jsonl(job.coord_log) if j.get("event") == "resumed"]
    if len(resumed) != 1 or not saved[-1] + 1 <= resumed[0]["iteration"] <= killed_at + 1 \
            or resumed[0]["workers_back"] != back:
        fail(f"the coordinator did not resume from its last checkpoint with workers {back}: {resumed}, "
             f"checkpoints {saved[-3:]}, killed after round {killed_at}")
    err = (job.tmp / "coordinator.err").read_text()
    if "1 svm problem(s) solved before the checkpoint; the next resumes from its multipliers" not in err:
        fail("the resumed coordinator did not take the first problem from the checkpoint: " + err[-600:])
    if lose_worker and "moved back to worker 2" not in err.split("resuming at round")[-1]:
        events = [j for j in jsonl(job.coord_log) if j.get("worker") == 2 or j.get("event") in ("resumed", "partition")]
        fail("worker 2's rows did not move back to it after it rejoined the resumed coordinator\n"
             f"coordinator since the resume:{err.split('resuming at round')[-1][-1500:]}\n"
             f"worker 2: {(job.tmp / 'worker-2.err').read_text()[-800:]}\ncoordinator events: {events[-12:]}")
    probs, svs = ref
    got = job.summary()["problems"]
    worst = max(abs(g["obj"] - p["obj"]) / abs(p["obj"]) for g, p in zip(got, probs))
    first = abs(got[0]["obj"] - probs[0]["obj"]) / abs(probs[0]["obj"])
    if len(got) != len(probs) or worst > 1e-6 or first > 1e-6:
        fail(f"objectives {worst:.2e} relative off single-node, problem 1 (from the checkpoint) {first:.2e}")
    agree = predictions_agree(a, tmp, data, job.model)
    print(f"resumed at round {resumed[0]['iteration']}; objectives within {worst:.1e} of single-node; "
          f"{agree * 100:.2f}% of the training set predicted alike")
    if agree < 1.0:
        fail("the resumed model predicts differently from single-node's")


def scenario_svm_coordinator_restart_worker_lost(a, tmp):
    scenario_svm_coordinator_restart(a, tmp, lose_worker=True)


# The same with --pull: members hold only their own rows, so a worker that
# returns reads its rows again, a joiner reads those a re-split gives it,
# the rows of one that leaves or is lost are read by their new owner, and
# every rebuilt gradient streams the support vectors' rows from their
# owners; a resumed coordinator's members rebuild every gradient so.
def scenario_svm_pull_kill_restart(a, tmp):
    scenario_svm_kill_restart(a, tmp, pull=["--pull"])


def scenario_svm_pull_elastic(a, tmp):
    scenario_svm_elastic(a, tmp, pull=["--pull"])


def scenario_svm_pull_coordinator_restart(a, tmp):
    scenario_svm_coordinator_restart(a, tmp, lose_worker=True, pull=["--pull"])


def predictions_agree(a, tmp, data, model):
    single = str(Path(tmp) / "single.model")
    out = []
    for m in (single, model):
        pred = str(Path(tmp) / (Path(m).name + ".pred"))
        r = subprocess.run([a.accel, "svm-predict", data, m, pred], capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            fail("svm-predict failed: " + r.stderr)
        out.append(Path(pred).read_text().split())
    return sum(x == y for x, y in zip(*out)) / len(out[0])


def scenario_svm_intruder(a, tmp):
    data = long_data(tmp)
    ref = single_node(a, tmp, data, PARAMS)
    job = SvmJob(a, Path(tmp) / "run", 2, data, PARAMS, timeout_ms=5000)  # attackers take the CPU; the test is about refusals
    job.wait_round(100)
    r = subprocess.run([a.intruder, "127.0.0.1", str(job.port), str(ct.job_token(job.port)), str(job.round() + 1)], capture_output=True,
                       text=True, timeout=60)
    print(r.stdout.strip())
    job.finish()
    err = (job.tmp / "coordinator.err").read_text()
    for needle in ("refused a connection", "wrong job token", "dropped", "not sealed", "its seal does not verify"):
        if needle not in err:
            fail(f"coordinator log lacks '{needle}':\n{err[-1500:]}")
    check_model(job, ref, "after the intruder")


def scenario_svm_stale_snapshot(a, tmp):
    os.environ["ACCEL_JOB_TOKEN"] = "7"  # both jobs the launcher's same token
    data = str(Path(tmp) / "three.train")
    libsvm(data, 3000, 20, 3, 3)
    first = SvmJob(a, Path(tmp) / "first", 2, long_data(tmp), PARAMS)
    first.wait_event(2, "snapshot", 60)
    first.kill_all()
    for p in [first.coord, *first.procs.values()]:
        p.wait()
    snap = Path(tmp) / "first" / "snapshots" / "worker-2.snapshot"
    if not snap.exists():
        fail("the first job left no snapshot to test with")
    second = Path(tmp) / "second"
    (second / "snapshots").mkdir(parents=True)
    (second / "snapshots" / "worker-2.snapshot").write_bytes(snap.read_bytes())
    ref = single_node(a, tmp, data, PARAMS)
    job = SvmJob(a, second, 2, data, PARAMS)
    job.finish()
    if "stale snapshot discarded" not in (second / "worker-2.err").read_text():
        fail("worker 2 did not discard its stale snapshot")
    check_model(job, ref, "a stale snapshot discarded")


def scenario_svm_netns(a, tmp):
    if os.geteuid() != 0:
        ct.skip("needs root for network namespaces")
    if subprocess.run(["ip", "netns", "add", "accel-probe"], capture_output=True).returncode != 0:
        ct.skip("ip netns is not available here")
    subprocess.run(["ip", "netns", "del", "accel-probe"], capture_output=True)
    data = str(Path(tmp) / "three.train")
    libsvm(data, 3000, 20, 3, 4)
    ref = single_node(a, tmp, data, PARAMS)
    model = str(Path(tmp) / "netns.model")
    env = dict(os.environ, ACCEL_BIN=a.accel, ACCEL_CLUSTER_DIR=str(Path(tmp) / "run"))
    cmd = [str(Path(a.scripts) / "cluster.sh"), "2", "--netns", "--", "svm-train", *PARAMS, "--timeout-ms", "3000",
           "--json", data, model]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=170)
    if r.returncode != 0:
        fail("cluster.sh --netns svm-train failed: " + r.stderr[-800:])
    s = json.loads(r.stdout.strip().splitlines()[0])
    got, (probs, svs) = s["problems"], ref
    worst = max(abs(g["obj"] - p["obj"]) / abs(p["obj"]) for g, p in zip(got, probs))
    # No failures, but a borderline support vector may change sides with the
    # partition the probe measured (docs/cluster.md; 1 of 1,716 in one run
    # of two on a Zen 3 host).
    differ = differing_support_vectors("across namespaces", support_vectors(model), svs, cost(PARAMS))
    if worst > 1e-6:
        fail(f"the model across namespaces differs: objective {worst:.2e}")
    if any(j.get("evicted") for j in jsonl(Path(tmp) / "run" / "coordinator.jsonl")):
        fail("evictions across namespaces without failures")
    print(f"2 workers in network namespaces (UCX_TLS=tcp): objectives within {worst:.1e}, "
          f"{differ} of {len(svs)} support vectors differ")


def main():
    # One thread per process: a scenario runs 4-5 processes on what may be
    # 2 cores, and their OpenMP threads, spinning while they wait, starved
    # healthy members past the 1 s timeout in CI (cluster.kill_restart:
    # a survivor waited 2.01 s, then two were evicted). The scenarios test
    # membership, not speed; a deployment gives each process its own cores.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    p = argparse.ArgumentParser()
    p.add_argument("scenario")
    p.add_argument("--accel", required=True)
    p.add_argument("--intruder", required=True)
    p.add_argument("--scripts", required=True)
    a = p.parse_args()
    fn = globals().get("scenario_" + a.scenario)
    if fn is None:
        fail("unknown scenario " + a.scenario)
    with tempfile.TemporaryDirectory(prefix=f"accel-{a.scenario}-") as tmp:
        ct.TMP = tmp
        try:
            fn(a, tmp)
        finally:
            ct.kill_started()
            if os.environ.get("ACCEL_KEEP_LOGS"):
                subprocess.run(["rm", "-rf", f"/tmp/kept-{a.scenario}"])
                subprocess.run(["cp", "-r", tmp, f"/tmp/kept-{a.scenario}"])
    print("PASS")


if __name__ == "__main__":
    main()
