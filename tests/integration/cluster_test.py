#!/usr/bin/env python3
"""Distributed k-means scenarios on loopback (stdlib only, bounded in time).

    cluster_test.py SCENARIO --accel BIN --intruder BIN --scripts DIR

Scenarios: equal, kill_restart, sigstop, coordinator_kill, intruder,
netns_delay. Exit 0 pass, 1 fail, 77 skipped (reason printed).
"""
import argparse
import array
import hashlib
import json
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


TMP = None  # the scenario's directory: its logs are printed on failure
# Sanitizer builds run several times slower (scripts/sanitize.sh sets this):
# every timeout a scenario gives the processes, and every wait for them,
# scales by it.
SCALE = float(os.environ.get("ACCEL_TEST_TIME_SCALE", "1"))


def fail(msg):
    print("FAIL:", msg)
    if TMP:
        for f in sorted(Path(TMP).glob("*.err")):
            tail = f.read_text().strip().splitlines()[-6:]
            if tail:
                print(f"--- {f.name}:", *tail, sep="\n  ")
    sys.exit(1)


def skip(msg):
    print("SKIP:", msg)
    sys.exit(77)


def write_npy(path, rows, cols, values):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, cols)
    header += " " * (64 - (10 + len(header) + 1) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(values.tobytes())


def read_npy_floats(path):
    data = Path(path).read_bytes()
    hlen = struct.unpack("<H", data[8:10])[0]
    a = array.array("f")
    a.frombytes(data[10 + hlen:])
    return a


def kept_reference(a, data, args, suffix):
    """Where a single-node reference result is kept across scenarios, or
    None. Most scenarios compare with a single-node run on the same data and
    options; with ACCEL_TEST_CACHE set (ctest sets it to one folder of the
    build) each is computed once per build. The key is all the result
    depends on: the binary (path, size, time), the data's bytes, the
    arguments and the ACCEL_, OMP_ and OPENBLAS_ environment (the threads
    a sum is split over). None as well for a data path that is not one
    file (a glob of parts)."""
    cache = os.environ.get("ACCEL_TEST_CACHE")
    if not cache or not os.path.isfile(data):
        return None
    h = hashlib.sha256()
    st = os.stat(a.accel)
    h.update(f"{os.path.realpath(a.accel)} {st.st_size} {st.st_mtime_ns}\n{args}\n".encode())
    h.update(repr(sorted((k, v) for k, v in os.environ.items()
                         if k.startswith(("ACCEL_", "OMP_", "OPENBLAS_")))).encode())
    h.update(Path(data).read_bytes())
    Path(cache).mkdir(parents=True, exist_ok=True)
    return Path(cache) / (h.hexdigest() + suffix)


def keep(kept, path):
    """`path`'s bytes kept at `kept`, whole or not at all."""
    part = kept.with_name(f"{kept.name}.{os.getpid()}.part")
    shutil.copyfile(path, part)
    os.replace(part, kept)


def kill_together(procs, ids):
    """SIGKILL every process of `ids` first, then reap them: they die within
    the same round, as a rack losing power would take them."""
    for w in ids:
        procs[w].send_signal(signal.SIGKILL)
    for w in ids:
        procs[w].wait()


def blobs(path, n, d, centers, seed):
    rng = random.Random(seed)
    c = [[rng.uniform(-20, 20) for _ in range(d)] for _ in range(centers)]
    v = array.array("f", bytes(4 * n * d))
    for i in range(n):
        ci = c[i % centers]
        for j in range(d):
            v[i * d + j] = ci[j] + rng.uniform(-1.5, 1.5)
    write_npy(path, n, d, v)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def listening_port(err_path):
    """The port of the coordinator's latest 'listening on ADDR:PORT' line."""
    return int(re.findall(r"listening on [0-9.]+:([0-9]+)", Path(err_path).read_text())[-1])


def jsonl(path):
    out = []
    if Path(path).exists():
        for line in Path(path).read_text().splitlines():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                pass  # a line being written
    return out


# Every process this test starts, so that the cleanup kills those by PID
# and nothing else (a pattern match could hit another run's processes).
STARTED = []


def start(cmd, **kw):
    p = subprocess.Popen(cmd, **kw)
    STARTED.append(p)
    return p


def kill_started():
    for p in STARTED:
        if p.poll() is None:
            p.kill()
    for p in STARTED:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


class Job:
    def __init__(self, a, tmp, workers, data, k, iters, timeout_ms, extra=(), worker_extra=(), pin=False,
                 worker_env=None, on_listen=None, worker_prefix=(), coord_prefix=(), init="random", prefix_of=None,
                 coord_env=None):
        self.a, self.tmp, self.n = a, Path(tmp), workers
        self.worker_prefix = list(worker_prefix)  # a command the workers run under (/usr/bin/time)
        self.prefix_of = prefix_of or {}  # one worker's own (a mount namespace)
        self.pin = pin  # coordinator on core 0, worker i on core i (mod cores), one thread each
        self.worker_extra = list(worker_extra)
        timeout_ms = int(timeout_ms * SCALE)
        self.timeout_ms = timeout_ms
        self.procs = {}
        self.coord_log = self.tmp / "coordinator.jsonl"
        # Port 0: the coordinator binds a free one and says which (a port
        # picked here and bound later was once taken meanwhile, by another
        # process's outgoing connection).
        cmd = (["taskset", "-c", "0"] if pin else []) + list(coord_prefix) + [a.accel, "coordinator", "--input", data, "--k", str(k), "--workers", str(workers), "--listen",
               "127.0.0.1:0", "--max-iter", str(iters), "--tol", "0", "--timeout-ms", str(timeout_ms), "--device", "cpu",
               "--keepalive-ms", str(int(2000 * SCALE)), "--log-json", str(self.coord_log), "--json", "--init", init,
               "--output-centroids", str(self.tmp / "centroids.npy"), *extra]
        self.coord_cmd = cmd
        self.start_coordinator(env=coord_env)
        if on_listen is not None:  # before any worker: an attack on the front door, say
            on_listen(self)
        for i in range(1, workers + 1):
            self.start_worker(i, (worker_env or {}).get(i))

    def start_coordinator(self, extra=(), env=None):
        """The coordinator, with `extra` options (a restart: --resume DIR)
        and `env` added to the environment."""
        err = self.tmp / "coordinator.err"
        said = err.read_text().count("listening") if err.exists() else 0
        self.coord = start(self.coord_cmd + list(extra), stdout=open(self.tmp / "coordinator.out", "w"),
                           stderr=open(err, "a"), env=None if env is None else {**os.environ, **env})
        self.wait_for(lambda: err.read_text().count("listening") > said, 20, "the coordinator to listen")
        self.port = listening_port(err)
        self.addr = f"127.0.0.1:{self.port}"

    def start_worker(self, i, env=None, with_id=True):
        # with_id=False: a worker that joins without --id (the coordinator
        # gives it one); `i` then only names its files.
        cmd = (["taskset", "-c", str(i % os.cpu_count())] if self.pin else []) + self.prefix_of.get(i, self.worker_prefix) + [
               self.a.accel, "worker", "--coordinator", self.addr, *(["--id", str(i)] if with_id else []), "--device", "cpu",
               "--timeout-ms", str(self.timeout_ms), "--keepalive-ms", str(int(2000 * SCALE)), "--snapshot-dir",
               str(self.tmp / "snapshots"), "--log-json", str(self.tmp / f"worker-{i}.jsonl"), *self.worker_extra]
        self.procs[i] = start(cmd, stdout=open(self.tmp / f"worker-{i}.out", "a"),
                                         stderr=open(self.tmp / f"worker-{i}.err", "a"),
                                         env=None if env is None else {**os.environ, **env})

    def iteration(self):
        return sum(1 for j in jsonl(self.coord_log) if j.get("participant") == 0)

    def wait_for(self, pred, seconds, what):
        end = time.time() + seconds * SCALE
        while time.time() < end:
            if pred():
                return
            if self.coord.poll() is not None and "coordinator" not in what:
                break
            time.sleep(0.01)
        if not pred():
            fail(f"timed out waiting for {what}")

    def wait_iteration(self, t, seconds=60):
        self.wait_for(lambda: self.iteration() >= t, seconds, f"iteration {t}")

    def finish(self, seconds=120):
        try:
            rc = self.coord.wait(timeout=seconds * SCALE)
        except subprocess.TimeoutExpired:
            self.kill_all()
            fail("the coordinator did not finish in time")
        for p in self.procs.values():
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                fail("a worker did not exit after the job")
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
        return json.loads((self.tmp / "coordinator.out").read_text())


def job_token(port):
    """The token the coordinator drew for the job on `port` (docs/cluster.md: Joining a job)."""
    return int((Path.home() / ".accel" / f"job-{port}.token").read_text(), 0)


def check_agreement(job, survivors):
    """Every survivor logged the same membership lists at every iteration."""
    views = {}
    for pid, lines in job.logs().items():
        if pid not in survivors:
            continue
        for j in lines:
            if "members" in j and "iteration" in j:
                views.setdefault(j["iteration"], {})[pid] = json.dumps(j["members"], sort_keys=True)
    bad = {t: v for t, v in views.items() if len(set(v.values())) > 1}
    if bad:
        fail(f"membership lists disagree at iterations {sorted(bad)[:5]}: {bad[sorted(bad)[0]]}")


def check_same_result(job, survivors, key="inertia"):
    """Every survivor computed the same result at every iteration it logged
    as a counting member (k-means: the same inertia, to the bit): a
    participant that counted other contributions than the rest would part
    from them silently."""
    seen = {}
    for pid, lines in job.logs().items():
        if pid not in survivors:
            continue
        for j in lines:
            if key in j and "iteration" in j and pid in j.get("members", {}).get("active", []):
                seen.setdefault(j["iteration"], {})[pid] = j[key]
    bad = {t: v for t, v in seen.items() if len(set(v.values())) > 1}
    if bad:
        fail(f"participants computed different results at iterations {sorted(bad)[:5]}: {bad[sorted(bad)[0]]}")


def check_no_stall(job, survivors, slack=1.0):
    limit = job.timeout_ms / 1000 + slack * SCALE
    for pid, lines in job.logs().items():
        if pid in survivors:
            for j in lines:
                if j.get("barrier_wait_s", 0) > limit:
                    fail(f"participant {pid} waited {j['barrier_wait_s']:.2f} s at iteration {j['iteration']}")


def check_recovery(job, what="round"):
    """Issue 13's recovery bound: the round in which the coordinator evicts a
    killed worker (the first without it) takes at most 2x a normal round
    plus the timeout. Asserted without the one-time rebuild of the lost
    rows on their new owner (logged as applying_s: SVM reconstructs their
    gradients from alpha), which is printed, with whether the bound held
    with it too."""
    lines = [j for j in jsonl(job.coord_log) if j.get("participant") == 0]
    t = {j["iteration"]: j["t_s"] for j in lines}
    per = {i: t[i] - t[i - 1] for i in t if i - 1 in t}
    lost = next((j for j in lines if j.get("evicted")), None)
    if lost is None or lost["iteration"] not in per:
        fail("no eviction logged after the kill")
    i = lost["iteration"]
    normal = sorted(per[k] for k in per if 2 < k < i - 1)
    normal = normal[len(normal) // 2]
    bound = 2 * normal + job.timeout_ms / 1000
    rebuild = lost.get("applying_s", 0.0)
    print(f"recovery: the {what} that evicted the killed worker took {per[i] * 1e3:.0f} ms, of it "
          f"{rebuild * 1e3:.1f} ms rebuilding the lost rows; normal {normal * 1e3:.1f} ms, timeout "
          f"{job.timeout_ms} ms: bound {bound * 1e3:.0f} ms, {'met' if per[i] <= bound else 'missed'} with the "
          f"rebuild ({per[i] / bound:.3f} of it), {(per[i] - rebuild) / bound:.3f} of it without")
    if per[i] - rebuild > bound:
        fail(f"recovery took {per[i]:.3f} s, over 2 x {normal:.3f} s + the timeout")


def scenario_equal(a, tmp):
    data = str(Path(tmp) / "x.npy")
    blobs(data, 60000, 6, 8, 1)
    job = Job(a, tmp, 4, data, 8, 15, 2000)
    if job.finish() != 0:
        fail("coordinator failed: " + (Path(tmp) / "coordinator.err").read_text())
    single = Path(tmp) / "single.npy"
    r = subprocess.run([a.accel, "kmeans", "--input", data, "--k", "8", "--max-iter", "15", "--tol", "0", "--init",
                        "random", "--device", "cpu", "--output-centroids", str(single)], capture_output=True, text=True)
    if r.returncode != 0:
        fail(r.stderr)
    x, y = read_npy_floats(Path(tmp) / "centroids.npy"), read_npy_floats(single)
    worst = max(abs(p - q) / (1 + abs(q)) for p, q in zip(x, y))
    print(f"4-worker vs single-node centroids: max relative difference {worst:.2e}")
    if worst > 1e-5:
        fail("distributed centroids differ from the single-node run")
    s = job.summary()
    if s["members"]["active"] != [0, 1, 2, 3, 4]:
        fail(f"members at the end: {s['members']}")


def peak_rss(job, workers):
    """Peak RSS in bytes of the coordinator (0) and each worker, as
    /usr/bin/time printed it (maxrss_kb); every worker must have taken part
    in a round."""
    logs = job.logs()
    peaks = {}
    for i in range(0, workers + 1):
        if i > 0 and not any(j.get("participant") == i for j in logs[i]):
            fail(f"worker {i} took part in no round")
        err = job.tmp / ("coordinator.err" if i == 0 else f"worker-{i}.err")
        said = [l for l in err.read_text().splitlines() if l.startswith("maxrss_kb")]
        peaks[i] = int(said[-1].split()[1]) * 1024
    return peaks


def scenario_pull(a, tmp):
    # --pull: each worker reads its own rows from the shared file, and only
    # those (a .npy range read); the coordinator streams the file through
    # its checks and the k-means++ seeding and keeps only its own share.
    # Every process's peak memory stays far below the file's size, and the
    # centroids are the single-node ones. 8M x 16 float32 (512 MB): a
    # 100,000-row blob set repeated 80 times.
    data = Path(tmp) / "big.npy"
    chunk = str(Path(tmp) / "chunk.npy")
    blobs(chunk, 100000, 16, 8, 11)
    body = Path(chunk).read_bytes()
    hlen = struct.unpack("<H", body[8:10])[0]
    rows = 100000 * 80
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, 16)
    header += " " * (64 - (10 + len(header) + 1) % 64) + "\n"
    with open(data, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        for _ in range(80):
            f.write(body[10 + hlen:])
    size = data.stat().st_size
    timed = ["/usr/bin/time", "-f", "maxrss_kb %M"]
    job = Job(a, tmp, 3, str(data), 8, 5, 5000, extra=["--pull"], worker_prefix=timed, coord_prefix=timed,
              init="kmeans++")
    if job.finish() != 0:
        fail("coordinator failed: " + (Path(tmp) / "coordinator.err").read_text()[-800:])
    single = Path(tmp) / "single.npy"
    r = subprocess.run([a.accel, "kmeans", "--input", str(data), "--k", "8", "--max-iter", "5", "--tol", "0", "--init",
                        "kmeans++", "--device", "cpu", "--output-centroids", str(single)], capture_output=True, text=True)
    if r.returncode != 0:
        fail(r.stderr)
    x, y = read_npy_floats(Path(tmp) / "centroids.npy"), read_npy_floats(single)
    worst = max(abs(p - q) / (1 + abs(q)) for p, q in zip(x, y))
    logs = job.logs()
    peaks = peak_rss(job, 3)
    rows_of = list(job.summary()["rows"])
    # The coordinator also computes the tails a re-split moves to it: its
    # rows are its share plus the most it held at once.
    held = [sum(l - k for l, k in zip(rows_of[1:], e["kept"][1:])) for e in logs[0] if e.get("event") == "resplit"]
    rows_of[0] += max(held, default=0)
    print(f"--pull on a {size / 1e6:.0f} MB file: rows {rows_of}; peak RSS (0: the coordinator) "
          + ", ".join(f"{i}: {p / 1e6:.0f} MB" for i, p in peaks.items())
          + f"; centroids within {worst:.1e} of single-node")
    if worst > 1e-5:
        fail("the --pull centroids differ from the single-node run")
    # The scale-out issue's bound: 1.1 x the bytes of the rows it owns +
    # 150 MB (reading the whole file, a worker had peaked at 700 MB here,
    # the coordinator at 560 MB).
    for i, p in peaks.items():
        own = rows_of[i] * 16 * 4
        if p > 1.1 * own + 150e6:
            who = "the coordinator" if i == 0 else f"worker {i}"
            fail(f"{who} peaked at {p / 1e6:.0f} MB with {own / 1e6:.0f} MB of rows of a {size / 1e6:.0f} MB file")


def scenario_pull_text(a, tmp):
    # --pull on CSV text: the coordinator parses the text once into a spill
    # file it maps and gives back as it goes (it held every row as floats
    # before: 250-400 MB here), and each worker seeks to the mark before
    # its rows and parses its own lines alone. 1M x 64 (256 MB as float32,
    # ~420 MB of text): a 50,000-row blob set repeated 20 times, with a
    # header line and blank lines.
    d, chunk_rows, copies = 64, 50000, 20
    rng = random.Random(5)
    centers = [[rng.uniform(-20, 20) for _ in range(d)] for _ in range(6)]
    lines = []
    for i in range(chunk_rows):
        c = centers[i % 6]
        lines.append(",".join("%.3f" % (v + rng.uniform(-1.5, 1.5)) for v in c))
        if i % 9973 == 0:
            lines.append("")
    body = "\n".join(lines) + "\n"
    data = Path(tmp) / "big.csv"
    with open(data, "w") as f:
        f.write(",".join(f"f{j}" for j in range(d)) + "\n")
        for _ in range(copies):
            f.write(body)
    size = data.stat().st_size
    timed = ["/usr/bin/time", "-f", "maxrss_kb %M"]
    job = Job(a, tmp, 3, str(data), 6, 4, 20000, extra=["--pull"], worker_prefix=timed, coord_prefix=timed,
              init="kmeans++")
    if job.finish() != 0:
        fail("coordinator failed: " + (Path(tmp) / "coordinator.err").read_text()[-800:])
    single = Path(tmp) / "single.npy"
    r = subprocess.run([a.accel, "kmeans", "--input", str(data), "--k", "6", "--max-iter", "4", "--tol", "0", "--init",
                        "kmeans++", "--device", "cpu", "--output-centroids", str(single)], capture_output=True, text=True)
    if r.returncode != 0:
        fail(r.stderr)
    x, y = read_npy_floats(Path(tmp) / "centroids.npy"), read_npy_floats(single)
    worst = max(abs(p - q) / (1 + abs(q)) for p, q in zip(x, y))
    rows_of = list(job.summary()["rows"])
    peaks = peak_rss(job, 3)
    print(f"--pull on {size / 1e6:.0f} MB of CSV ({chunk_rows * copies} x {d}): rows {rows_of}; peak RSS "
          + ", ".join(f"{i}: {p / 1e6:.0f} MB" for i, p in peaks.items())
          + f"; centroids within {worst:.1e} of single-node")
    if worst > 1e-5:
        fail("the --pull centroids differ from the single-node run")
    for i, p in peaks.items():
        own = (max(rows_of) if i == 0 else rows_of[i]) * d * 4  # the coordinator may stand in for a worker's tail
        if p > 1.1 * own + 150e6:
            who = "the coordinator" if i == 0 else f"worker {i}"
            fail(f"{who} peaked at {p / 1e6:.0f} MB with {own / 1e6:.0f} MB of rows of {size / 1e6:.0f} MB of text")


def scenario_pull_parts(a, tmp):
    # --pull on an input of part files (a glob of .npy parts of uneven
    # sizes, one of them empty): each worker reads its rows from the parts
    # that hold them, and so do the survivors that take over worker 2's
    # rows when it is killed -9. The centroids equal a single-node run on
    # the same rows in one file.
    data = Path(tmp) / "x.npy"
    blobs(str(data), 300000, 8, 12, 9)
    body = data.read_bytes()
    hlen = struct.unpack("<H", body[8:10])[0]
    values = array.array("f")
    values.frombytes(body[10 + hlen:])
    parts = Path(tmp) / "parts"
    parts.mkdir()
    cuts = [0, 1, 70000, 70000, 190001, 300000]
    for k in range(len(cuts) - 1):
        write_npy(parts / f"part-{k:05d}.npy", cuts[k + 1] - cuts[k], 8, values[cuts[k] * 8:cuts[k + 1] * 8])
    iters = 40
    job = Job(a, tmp, 3, str(parts / "part-*.npy"), 12, iters, 1000, extra=["--pull"], init="kmeans++")
    job.wait_iteration(8)
    job.procs[2].send_signal(signal.SIGKILL)
    job.procs[2].wait()
    if job.finish() != 0:
        fail("coordinator failed: " + (Path(tmp) / "coordinator.err").read_text()[-800:])
    moved = [j for j in job.logs()[0] if j.get("event") == "rows_moved"]
    if not moved or not moved[0]["moves"]:
        fail(f"worker 2's rows were not moved: {moved}")
    single = Path(tmp) / "single.npy"
    r = subprocess.run([a.accel, "kmeans", "--input", str(data), "--k", "12", "--max-iter", str(iters), "--tol", "0",
                        "--init", "kmeans++", "--device", "cpu", "--output-centroids", str(single)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        fail(r.stderr)
    x, y = read_npy_floats(Path(tmp) / "centroids.npy"), read_npy_floats(single)
    worst = max(abs(p - q) / (1 + abs(q)) for p, q in zip(x, y))
    print(f"--pull on {len(cuts) - 1} part files, worker 2 killed: moves {moved[0]['moves']}; "
          f"centroids within {worst:.1e} of single-node on one file")
    if worst > 1e-5:
        fail("the centroids of the part files differ from the single-node run on one file")


def scenario_parallel_seeding(a, tmp):
    # --init kmeans-parallel: the members draw the k-means|| seeds from their
    # own rows in the job's first rounds (pick, cost, sample, cost, sample,
    # weigh), so the coordinator reads none but its share. With --pull,
    # worker 2 dies mid-send in the first sample round (3) and worker 3 in
    # the weigh round (6): others compute their rows, and the
    # seeds and centroids are single-node k-means||'s. Then CSV with --pull,
    # each member drawing from the lines it parsed itself.
    data = str(Path(tmp) / "x.npy")
    blobs(data, 200000, 8, 24, 5)
    iters = 12
    job = Job(a, tmp, 4, data, 24, iters, 1000, extra=["--pull"], init="kmeans-parallel",
              worker_env={2: {"ACCEL_FAULT_PARTIAL_SEND": "3:1"}, 3: {"ACCEL_FAULT_PARTIAL_SEND": "6:2"}})
    if job.finish() != 0:
        fail("coordinator failed: " + (Path(tmp) / "coordinator.err").read_text()[-800:])
    s = job.summary()
    if s.get("seeding_rounds") != 6 or s["iterations"] != iters or s["members"]["active"] != [0, 1, 4]:
        fail(f"unexpected summary {s}")
    for w, r in ((2, 3), (3, 6)):
        if f"dying in round {r}" not in (job.tmp / f"worker-{w}.err").read_text():
            fail(f"worker {w}'s fault was not injected")
    check_agreement(job, {0, 1, 4})
    check_same_result(job, {0, 1, 4}, key="candidates")
    check_same_result(job, {0, 1, 4})
    worst = failure_free_difference(a, tmp, data, 24, iters, init="kmeans-parallel")
    if worst > 0:
        fail(f"the centroids differ from single-node k-means|| by {worst:.1e}")
    csv = Path(tmp) / "x.csv"
    x = read_npy_floats(data)
    with open(csv, "w") as f:
        for i in range(50000):
            f.write(",".join(repr(v) for v in x[i * 8:(i + 1) * 8]) + "\n")
    tmp2 = Path(tmp) / "csv"
    tmp2.mkdir()
    job = Job(a, tmp2, 2, str(csv), 10, iters, 1000, extra=["--pull"], init="kmeans-parallel")
    if job.finish() != 0:
        fail("coordinator failed on CSV: " + (tmp2 / "coordinator.err").read_text()[-800:])
    worst_csv = failure_free_difference(a, tmp2, str(csv), 10, iters, init="kmeans-parallel")
    if worst_csv > 0:
        fail(f"the CSV job's centroids differ from single-node k-means|| by {worst_csv:.1e}")
    # Nobody reads the whole file, so a NaN is found by the worker that
    # reads its row: one line naming the file and the row, exit 2.
    bad = Path(tmp) / "nan.npy"
    body = bytearray(Path(data).read_bytes())
    hlen = struct.unpack("<H", body[8:10])[0]
    struct.pack_into("<f", body, 10 + hlen + (150000 * 8 + 3) * 4, float("nan"))
    bad.write_bytes(bytes(body))
    tmp3 = Path(tmp) / "nan"
    tmp3.mkdir()
    job = Job(a, tmp3, 2, str(bad), 10, iters, 1000, extra=["--pull"], init="kmeans-parallel")
    rc = job.finish()
    err = (tmp3 / "coordinator.err").read_text()
    if rc != 2 or f"{bad}: row 150001, column 4 is NaN" not in err:
        fail(f"a NaN in a worker's rows: exit {rc}, {err[-300:]}")
    print(f"k-means|| drawn by the members in {s['seeding_rounds']} rounds, workers 2 and 3 killed in rounds 3 and 6: "
          f"centroids equal single-node's ({worst:.1e}); CSV --pull: {worst_csv:.1e}")


def write_libsvm_blobs(path, n, d, centers, seed):
    """LIBSVM text of n rows near `centers` random centres, with what a
    reader must skip: comments, blank lines, CRLF line ends, a row of no
    features; every 7th value is left out (sparse)."""
    rng = random.Random(seed)
    cs = [[rng.uniform(-10, 10) for _ in range(d)] for _ in range(centers)]
    with open(path, "w", newline="") as f:
        f.write("# a comment line before the rows\n")
        for i in range(n):
            c = cs[i % centers]
            feats = " ".join(f"{j + 1}:{c[j] + rng.uniform(-1, 1):.4f}" for j in range(d) if (i + j) % 7)
            end = "\r\n" if i % 5 == 0 else "\n"
            f.write(f"{i % 2} {feats}{end}" if i != 7 else f"1{end}")
            if i % 4099 == 0:
                f.write("\n   # blank and comment lines between the rows\n")


def scenario_pull_text_counted(a, tmp):
    # --pull on LIBSVM and CSV text with --init kmeans-parallel: the
    # coordinator reads no text to number the rows. Each worker counts the
    # rows of its byte split of the file (the lines that start in it, as
    # Hadoop's input splits) and sends the counts and marks; the coordinator
    # reads only the rows it computes. Worker 2 is killed -9 mid-job and
    # its rows move to the survivors, who read them from its split. The
    # centroids equal single-node k-means||'s exactly. Then: a bad value in
    # worker 3's split is one line naming the file's line (the marks carry
    # the file's line numbers), exit 2; and a coordinator killed mid-job and
    # resumed counts the splits again itself, the same way.
    data = Path(tmp) / "x.svm"
    write_libsvm_blobs(data, 120000, 12, 8, 3)
    iters = 30
    job = Job(a, tmp, 3, str(data), 8, iters, 1000, extra=["--pull"], init="kmeans-parallel")
    job.wait_iteration(10)
    job.procs[2].send_signal(signal.SIGKILL)
    job.procs[2].wait()
    if job.finish() != 0:
        fail("coordinator failed: " + (job.tmp / "coordinator.err").read_text()[-800:])
    counted = [j for j in jsonl(job.coord_log) if j.get("event") == "input_counted"]
    if not counted or counted[0]["splits"] != 3 or counted[0]["rows"] != 120000:
        fail(f"the workers did not count the input: {counted}")
    moved = [j for j in jsonl(job.coord_log) if j.get("event") == "rows_moved" and j["moves"]]
    if not moved:
        fail("worker 2's rows were not moved")
    worst = failure_free_difference(a, tmp, str(data), 8, iters, init="kmeans-parallel")
    if worst > 0:
        fail(f"the centroids differ from single-node k-means|| by {worst:.1e}")

    csv = Path(tmp) / "x.csv"
    x = read_npy_floats(job.tmp / "centroids.npy")
    rng = random.Random(4)
    lines = ["a,b,c,d"]
    for i in range(60000):
        lines.append(",".join(f"{rng.gauss(x[(i % 8) * 12 + j], 1):.5f}" for j in range(4)))
        if i % 5000 == 0:
            lines.append("")
    bad_line = len(lines) - 100  # in worker 3's split, the last third
    good = "\n".join(lines) + "\n"
    lines[bad_line - 1] = "1,2,oops,4"
    (Path(tmp) / "bad.csv").write_text("\n".join(lines) + "\n")
    tmp2 = Path(tmp) / "bad"
    tmp2.mkdir()
    job = Job(a, tmp2, 3, str(Path(tmp) / "bad.csv"), 8, iters, 1000, extra=["--pull"], init="kmeans-parallel")
    rc = job.finish()
    err = [l for l in (tmp2 / "coordinator.err").read_text().splitlines() if "listening" not in l and "token" not in l]
    if rc != 2 or len(err) != 1 or f"bad.csv:{bad_line}: not a number" not in err[0] or "worker 3" not in err[0]:
        fail(f"a bad value in worker 3's split: exit {rc}, {err}")
    if (tmp2 / "centroids.npy").exists():
        fail("centroids written for a job that did not run")

    csv.write_text(good)
    tmp3 = Path(tmp) / "restart"
    tmp3.mkdir()
    ckpt = tmp3 / "checkpoint"
    job = Job(a, tmp3, 3, str(csv), 8, iters, 1000, extra=["--pull", "--checkpoint-dir", str(ckpt), "--mtbf", "0.001"],
              init="kmeans-parallel", coord_env={"ACCEL_FAULT_PARTIAL_SEND": "9:1"},
              worker_extra=["--coordinator-timeout", str(int(60000 * SCALE))])
    job.coord.wait()
    if "dying in round 9" not in (tmp3 / "coordinator.err").read_text():
        fail("the coordinator's fault was not injected")
    job.start_coordinator(["--resume", str(ckpt)])
    if job.finish() != 0:
        fail("the resumed coordinator failed: " + (tmp3 / "coordinator.err").read_text()[-600:])
    worst_csv = failure_free_difference(a, tmp3, str(csv), 8, iters, init="kmeans-parallel")
    if worst_csv > 0:
        fail(f"the resumed CSV job's centroids differ from single-node k-means|| by {worst_csv:.1e}")
    print(f"LIBSVM --pull counted by 3 workers in {counted[0]['seconds']:.3f} s at the coordinator, worker 2 killed: "
          f"centroids equal single-node's ({worst:.1e}); a bad value: {err[0]}; CSV with the coordinator resumed: "
          f"{worst_csv:.1e}")


def scenario_pull_lost_in_turn(a, tmp):
    # --pull, and the workers are lost one after another, each once the rows
    # of the one before have moved to it: the last holds everyone's when it
    # dies, the plan then has nobody to give them to, and the coordinator
    # must stand in for all three members' rows (it once stood in for the
    # last one's own rows only, and the others' counted nowhere).
    data = str(Path(tmp) / "x.npy")
    blobs(data, 300000, 8, 16, 3)
    job = Job(a, tmp, 3, data, 16, 60, 1000, extra=["--pull"])

    def moved(n):
        job.wait_for(lambda: sum(1 for j in jsonl(job.coord_log) if j.get("event") == "rows_moved") >= n, 60,
                     f"plan {n} in effect")

    job.wait_iteration(4)
    for w, plans in ((3, 1), (1, 2), (2, 3)):
        job.procs[w].send_signal(signal.SIGKILL)
        job.procs[w].wait()
        moved(plans)
    if job.finish() != 0:
        fail("coordinator failed: " + (Path(tmp) / "coordinator.err").read_text()[-800:])
    taken = [j for j in job.logs()[0] if j.get("event") == "rows_taken_over"]
    last = {j["worker"]: j["rows"] for j in taken if j["iteration"] == taken[-1]["iteration"]}
    # A drift re-split before the losses (a noisy host) leaves a worker
    # keeping only the head of its partition; the coordinator computes the
    # tail all along, so it takes over only the kept rows.
    rows = job.summary()["rows"]
    resplits = [j["kept"] for j in jsonl(job.coord_log) if j.get("event") == "resplit"]
    tails = sum(r - k for r, k in zip(rows[1:], resplits[-1][1:])) if resplits else 0
    if sorted(last) != [1, 2, 3] or sum(last.values()) + tails != sum(rows[1:]):
        fail(f"the coordinator does not stand in for every lost member's rows at the end: {last}")
    worst = failure_free_difference(a, tmp, data, 16, 60)
    print(f"workers lost in turn, each holding the rows of the one before; at the end the coordinator stands in "
          f"for {last}; centroids within {worst:.1e} of the failure-free run")
    if worst > 1e-6:
        fail("the centroids differ from the failure-free run")


def scenario_coordinator_restart_seeding(a, tmp):
    # The coordinator dies mid-send in round 4 of a k-means|| seeding (the
    # second cost round; checkpoints every round) and is restarted with
    # --resume: it goes on from the seeding state of its last checkpoint,
    # and the centroids are single-node k-means||'s.
    data = str(Path(tmp) / "x.npy")
    blobs(data, 200000, 8, 16, 21)
    ckpt = Path(tmp) / "checkpoint"
    job = Job(a, tmp, 3, data, 16, 30, 1000, extra=["--checkpoint-dir", str(ckpt), "--mtbf", "0.001"],
              init="kmeans-parallel", coord_env={"ACCEL_FAULT_PARTIAL_SEND": "4:1"},
              worker_extra=["--coordinator-timeout", str(int(60000 * SCALE))])
    job.coord.wait()
    if "dying in round 4" not in (job.tmp / "coordinator.err").read_text():
        fail("the coordinator's fault was not injected")
    saved = [j["iteration"] for j in jsonl(job.coord_log) if j.get("event") == "checkpoint"]
    job.start_coordinator(["--resume", str(ckpt)])
    if job.finish() != 0:
        fail("the resumed coordinator failed: " + (job.tmp / "coordinator.err").read_text()[-600:])
    s = job.summary()
    if s.get("seeding_rounds") != 6 or s["iterations"] != 30 or s["members"]["active"] != [0, 1, 2, 3]:
        fail(f"unexpected summary {s}")
    worst = failure_free_difference(a, tmp, data, 16, 30, init="kmeans-parallel")
    print(f"coordinator killed in seeding round 4 (checkpoints {saved}), resumed: centroids within {worst:.1e} "
          "of single-node k-means||")
    if worst > 0:
        fail("the centroids differ from single-node k-means||")


def scenario_large_partials(a, tmp):
    # k x d doubles over 1 MiB per partial (Fashion-MNIST's k = 256 is 1.6 MB).
    data = str(Path(tmp) / "x.npy")
    blobs(data, 3000, 700, 10, 7)
    job = Job(a, tmp, 2, data, 200, 3, 5000)
    if job.finish() != 0:
        fail("coordinator failed: " + (Path(tmp) / "coordinator.err").read_text()[-500:])
    s = job.summary()
    if s["iterations"] != 3 or s["members"]["active"] != [0, 1, 2]:
        fail(f"unexpected summary {s}")
    print("200 x 700 partials (1.1 MB) exchanged for 3 iterations")


def scenario_kill_restart(a, tmp, snapshot_rows=False):
    data = str(Path(tmp) / "x.npy")
    blobs(data, 600000, 8, 16, 2)
    # k = 64: iterations of tens of ms even on a fast machine, so the job
    # outlasts the restart and the rejoin.
    job = Job(a, tmp, 4, data, 64, 300, 1000, worker_extra=["--snapshot-rows"] if snapshot_rows else [])
    job.wait_iteration(10)
    # The snapshot lands beside the first iterations without holding any back:
    # the kill tests a resume, so it waits for worker 2's to be on disk.
    job.wait_for(lambda: any(j.get("event") == "snapshot" for j in jsonl(job.tmp / "worker-2.jsonl")), 30,
                 "worker 2's snapshot")
    job.procs[2].send_signal(signal.SIGKILL)
    job.procs[2].wait()
    print(f"killed worker 2 at iteration {job.iteration()}")
    job.wait_iteration(20)
    check_recovery(job, "iteration")
    job.start_worker(2)
    print(f"restarted worker 2 at iteration {job.iteration()}")
    if job.finish() != 0:
        fail("coordinator failed")
    logs = job.logs()
    if not any(j.get("event") == "resumed" for j in logs[2]):
        fail("worker 2 did not resume from its snapshot")
    # Without --snapshot-rows the file holds the task only and the rows come
    # back from the coordinator; with it they come from the file.
    fetched = [j for j in logs[2] if j.get("event") == "rows_fetched"]
    resent = [j for j in logs[0] if j.get("event") == "rows_resent" and j.get("worker") == 2]
    if snapshot_rows and (fetched or resent):
        fail(f"worker 2 fetched its rows although its snapshot held them: {fetched} {resent}")
    if not snapshot_rows and (len(fetched) != 1 or len(resent) != 1 or fetched[0]["from"] != "coordinator"):
        fail(f"worker 2 did not get its rows back from the coordinator once: {fetched} {resent}")
    if fetched:
        print(f"worker 2 got its rows back from the coordinator in {fetched[0]['seconds']:.3f} s")
    s = job.summary()
    if 2 not in s["members"]["active"]:
        fail(f"worker 2 did not rejoin: {s['members']}")
    rejoined_at = min(j["iteration"] for j in logs[0] if "members" in j and j["iteration"] > 20 and 2 in j["members"]["active"])
    print(f"worker 2 active again at iteration {rejoined_at}; final members {s['members']}")
    check_agreement(job, {0, 1, 3, 4})
    check_same_result(job, {0, 1, 2, 3, 4})
    check_no_stall(job, {0, 1, 3, 4})
    # Numbers, not only membership: the coordinator stood in for worker 2's
    # rows while it was away, so the centroids are a single-node run's.
    worst = failure_free_difference(a, tmp, data, 64, 300)
    print(f"centroids within {worst:.1e} of the failure-free run")
    if worst > 1e-6:
        fail("the centroids differ from the failure-free run")


def scenario_nothing_lost(a, tmp, on_loss="move"):
    # Worker 2 killed and restarted: its rows are the coordinator's from the
    # next iteration until it counts again, so the job ends at the
    # failure-free centroids (within 1e-6); with --on-loss drop they are left
    # out meanwhile ([Antimatroid]).
    data = str(Path(tmp) / "x.npy")
    blobs(data, 1000000, 8, 16, 8)
    job = Job(a, tmp, 3, data, 16, 200, 1000, extra=["--on-loss", on_loss])
    job.wait_iteration(10)
    job.wait_for(lambda: any(j.get("event") == "snapshot" for j in jsonl(job.tmp / "worker-2.jsonl")), 30,
                 "worker 2's snapshot")
    job.procs[2].send_signal(signal.SIGKILL)
    job.procs[2].wait()
    killed_at = job.iteration()
    job.wait_iteration(killed_at + 20)
    job.start_worker(2)
    if job.finish() != 0:
        fail("coordinator failed")
    logs = job.logs()
    taken = [j for j in logs[0] if j.get("event") == "rows_taken_over"]
    back = [j for j in logs[0] if j.get("event") == "rows_handed_back"]
    if on_loss == "drop":
        if taken:
            fail(f"--on-loss drop moved rows: {taken}")
        print(f"--on-loss drop: worker 2's rows left out from iteration {killed_at} until it returned")
        return
    if not taken or not back:
        fail(f"worker 2's rows were not taken over and handed back: {taken} {back}")
    worst = failure_free_difference(a, tmp, data, 16, 200)
    print(f"worker 2 lost at iteration {taken[0]['iteration']}, the coordinator stood in for it from then "
          f"{taken[0]['iteration']} to {back[0]['iteration']}; centroids within {worst:.1e} of the failure-free run")
    if worst > 1e-6:
        fail("the centroids differ from the failure-free run")


def scenario_pull_moves(a, tmp, restart=False):
    # --pull, worker 2 killed -9: the coordinator stands in for it (reading
    # its rows a block at a time) only until the survivors, 1 and 3, compute
    # its rows, read from the input themselves; restarted, it takes them back
    # once the plan without it is in effect. The centroids are the
    # failure-free ones either way.
    data = str(Path(tmp) / "x.npy")
    blobs(data, 1000000, 8, 16, 8)
    job = Job(a, tmp, 3, data, 16, 200, 1000, extra=["--pull"])
    job.wait_iteration(10)
    if restart:
        job.wait_for(lambda: any(j.get("event") == "snapshot" for j in jsonl(job.tmp / "worker-2.jsonl")), 30,
                     "worker 2's snapshot")
    job.procs[2].send_signal(signal.SIGKILL)
    job.procs[2].wait()
    killed_at = job.iteration()
    job.wait_iteration(killed_at + 15)
    if restart:
        job.start_worker(2)
    if job.finish() != 0:
        fail("coordinator failed: " + (Path(tmp) / "coordinator.err").read_text()[-800:])
    logs = job.logs()
    moved = [j for j in logs[0] if j.get("event") == "rows_moved"]
    if not moved or not moved[0]["moves"]:
        fail(f"worker 2's rows were not moved: {moved}")
    first = moved[0]["moves"]
    # Worker 2's rows when it was lost: the first of its partition it kept
    # after the last re-split by speed (the coordinator computes the rest).
    kept = job.summary()["rows"][2]
    for e in logs[0]:
        if e.get("event") == "resplit" and e["iteration"] <= moved[0]["iteration"]:
            kept = e["kept"][2]
    # Worker 2's rows all go to the survivors, by their measured rates (a
    # survivor measured far slower may get none), which may also even out
    # their own shares (one giving the end of its rows).
    if (sum(m["rows"] for m in first if m["home"] == 2) != kept or not {m["by"] for m in first} <= {1, 3}
            or not {m["by"] for m in first if m["home"] == 2}):
        fail(f"the moves do not split worker 2's {kept} rows between workers 1 and 3: {first}")
    for w in (1, 3):
        planned = sum(m["rows"] for m in first if m["by"] == w)
        got = [j["moved_in"] for j in logs[w] if "moved_in" in j]
        if planned and (not got or got[0]["rows"] != planned):
            fail(f"worker {w} did not take its {planned} moved rows: {got}")
    on = [j for j in logs[0] if j.get("event") == "rows_handed_on"]
    if not on or on[0]["iteration"] != moved[0]["iteration"]:
        fail(f"the coordinator did not stop standing in when the moves took effect: {on} {moved[0]}")
    if restart:
        begin2 = job.summary()["rows"][0] + job.summary()["rows"][1]
        if len(moved) < 2 or any(m["home"] == 2 and m["begin"] == begin2 for m in moved[-1]["moves"]):
            fail(f"worker 2's rows did not go back to it: {moved}")
        last = [j for j in logs[0] if j.get("participant") == 0][-1]
        if 2 not in last["members"]["active"]:
            fail(f"worker 2 does not count again: {last['members']}")
    worst = failure_free_difference(a, tmp, data, 16, 200)
    print(f"worker 2 lost at iteration {killed_at}; its {kept} rows computed by workers 1 and 3 from iteration "
          f"{moved[0]['iteration']}" + (f", back with it from {moved[-1]['iteration']}" if restart else "")
          + f"; centroids within {worst:.1e} of the failure-free run")
    if worst > 1e-6:
        fail("the centroids differ from the failure-free run")


def leave_on_sigterm(proc, who, seconds):
    """SIGTERM to a worker: it must exit 0 within `seconds`; returns how long it took."""
    t0 = time.time()
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        fail(f"{who} did not leave within {seconds:.0f} s of SIGTERM")
    if code != 0:
        fail(f"{who} exited {code} after SIGTERM")
    return time.time() - t0


def round_times(rounds):
    """Each round's seconds (computing and synchronizing) and their median."""
    times = [j["computing_s"] + j["synchronizing_s"] for j in rounds]
    return times, sorted(times)[len(times) // 2]


def scenario_sigterm_leave(a, tmp, pull=True):
    # SIGTERM: worker 2 asks to leave and computes until its rows are handed
    # on at a round boundary to workers 1 and 3 (--pull: they read them;
    # push: the coordinator pushes them), then exits 0. Nobody waits out a timeout: no member is
    # evicted, and no round around the leave takes over twice the median.
    data = str(Path(tmp) / "x.npy")
    blobs(data, 1000000, 8, 16, 8)
    job = Job(a, tmp, 3, data, 16, 60, 3000, extra=["--pull"] if pull else [])
    job.wait_iteration(10)
    gone = leave_on_sigterm(job.procs[2], "worker 2", 30 * SCALE)
    if gone > 2 * SCALE:  # the timeout is 3 s: it did not wait one out
        fail(f"worker 2 took {gone:.1f} s to leave")
    if job.finish() != 0:
        fail("coordinator failed: " + (Path(tmp) / "coordinator.err").read_text()[-800:])
    logs = job.logs()
    asked = [j for j in logs[0] if j.get("event") == "leave"]
    left = [j for j in logs[0] if j.get("event") == "left"]
    if not asked or not left:
        fail(f"no leave in the coordinator's log: {asked} {left}")
    rounds = [j for j in logs[0] if j.get("participant") == 0]
    evicted = [j["iteration"] for j in rounds if j["evicted"]]
    if evicted:
        fail(f"members were evicted in rounds {evicted}: the leave waited out a timeout")
    times, median = round_times(rounds)
    around = [t for j, t in zip(rounds, times) if left[0]["iteration"] - 2 <= j["iteration"] <= left[0]["iteration"] + 1]
    # No round waited for it: a timeout is 3 s here. (The 2x-a-round target
    # is the benchmark's, bench_scale.py --elastic: rounds of a few ms are
    # noise on shared cores, and sanitizers slow them further.)
    if max(around) > job.timeout_ms / 2000:
        fail(f"rounds around the leave took {around} s against a median of {median} s")
    last = rounds[-1]["members"]
    if 2 in last["active"]:
        fail(f"worker 2 still counts after leaving: {last}")
    moved = [j for j in logs[0] if j.get("event") == "rows_moved"]
    if not moved or 2 not in {m["home"] for m in moved[0]["moves"]}:
        fail(f"worker 2's rows were not moved to the workers: {moved}")
    pushed = {j["worker"] for j in logs[0] if j.get("event") == "rows_pushed" and j["home"] == 2}
    if not pull and not pushed:
        fail("the coordinator pushed none of worker 2's rows")
    worst = failure_free_difference(a, tmp, data, 16, 60)
    print(f"worker 2 asked to leave at iteration {asked[0]['iteration']}, left at {left[0]['iteration']} and exited "
          f"{gone:.2f} s after SIGTERM "
          f"(rows to workers 1 and 3, {'read' if pull else 'pushed to ' + str(sorted(pushed))}); rounds around it "
          f"{max(around) * 1e3:.1f} ms at most, median {median * 1e3:.1f} ms; centroids within {worst:.1e} of the "
          f"failure-free run")
    if worst > 1e-6:
        fail("the centroids differ from the failure-free run")


def scenario_elastic(a, tmp, pull=True):
    # A job started with 2 workers (--max-workers 4, --pull); 2 more started
    # mid-job without --id get ids 3 and 4 and hold rows within 10 rounds of
    # counting; then worker 1 is sent SIGTERM and leaves without a timeout.
    # The centroids are the failure-free ones. Without --pull the same: the
    # coordinator pushes the joiners their rows, and worker 1's to the
    # others, from its mapping.
    data = str(Path(tmp) / "x.npy")
    # Fewer rows where the sanitizers slow every round (TSan: 200,000, at
    # about the regular build's round time): the same joins, moves and
    # leave, in a sixth of the 72 s a million rows took under TSan.
    blobs(data, int(1000000 / SCALE), 8, 16, 8)
    job = Job(a, tmp, 2, data, 16, 150, 3000, extra=[*(["--pull"] if pull else []), "--max-workers", "4"])
    job.n = 4  # the logs of the workers that join, too
    job.wait_iteration(10)
    # Together: neither is in the other's view when it announces itself, so
    # they reach each other through the coordinator's round (its peers).
    job.start_worker(3, with_id=False)
    job.start_worker(4, with_id=False)
    job.wait_for(lambda: sum(j.get("event") == "resynchronized" for j in jsonl(job.coord_log)) >= 2, 30,
                 "the joiners")
    joined_at = job.iteration()
    job.wait_iteration(joined_at + 15)
    leave_on_sigterm(job.procs[1], "worker 1", 30 * SCALE)
    if job.finish() != 0:
        fail("coordinator failed: " + (Path(tmp) / "coordinator.err").read_text()[-800:])
    logs = job.logs()
    rounds = [j for j in logs[0] if j.get("participant") == 0]
    counts = {w: next((j["iteration"] for j in rounds if w in j["members"]["active"]), None) for w in (3, 4)}
    if None in counts.values():
        fail(f"the joiners never counted: {counts}")
    # Within 10 rounds (the target, met by bench_scale.py --elastic
    # at 0.2 s rounds), or within 0.5 s: these rounds take ~5 ms, and a
    # joiner's rows come after a read, a digest and a commit round on 2
    # loaded cores (CI saw 13 rounds once: two plans in turn).
    at = {j["iteration"]: j["t_s"] for j in rounds}
    for w, since in counts.items():
        got = [j for j in logs[w] if "moved_in" in j]
        late = not got or (got[0]["iteration"] > since + 10
                           and at.get(got[0]["iteration"], 1e9) - at.get(since, 0) > 0.5 * SCALE)
        if late:
            fail(f"worker {w} counts from iteration {since} but holds rows from {got[:1]}")
    evicted = [j["iteration"] for j in rounds if j["evicted"]]
    evicted += [(w, j["iteration"]) for w in (2, 3, 4) for j in logs[w] if j.get("evicted")]
    if evicted:
        fail(f"members were evicted (here or in a worker's own view) in rounds {evicted}")
    left = [j for j in logs[0] if j.get("event") == "left"]
    if not left or left[0]["worker"] != 1:
        fail(f"worker 1 did not leave: {left}")
    times, median = round_times(rounds)
    after = [t for j, t in zip(rounds, times) if j["iteration"] == left[0]["iteration"]]
    if max(after) > job.timeout_ms / 2000:  # it waited for nobody (see scenario_sigterm_leave)
        fail(f"the round after the leave took {after} s against a median of {median} s")
    worst = failure_free_difference(a, tmp, data, 16, 150)
    print(f"workers 3 and 4 joined and counted from iterations {counts[3]} and {counts[4]}, holding rows from "
          f"{[next(j['iteration'] for j in logs[w] if 'moved_in' in j) for w in (3, 4)]}; worker 1 left at "
          f"{left[0]['iteration']} (that round {after[0] * 1e3:.1f} ms, median {median * 1e3:.1f} ms); centroids "
          f"within {worst:.1e} of the failure-free run")
    if worst > 1e-6:
        fail("the centroids differ from the failure-free run")


def scenario_elastic_push(a, tmp):
    scenario_elastic(a, tmp, pull=False)


def scenario_elastic_full(a, tmp):
    # A worker without --id at a job with no room (--max-workers = --workers)
    # is refused in one line and exits 2; the job goes on.
    data = str(Path(tmp) / "x.npy")
    blobs(data, 20000, 4, 4, 3)
    job = Job(a, tmp, 1, data, 4, 400, 3000, extra=["--job", "119"], worker_extra=["--job", "119"])
    job.wait_iteration(5)
    r = subprocess.run([a.accel, "worker", "--coordinator", job.addr, "--job", "119", "--device", "cpu"],
                       capture_output=True, text=True, timeout=60)
    lines = r.stderr.strip().splitlines()
    if r.returncode != 2 or len(lines) != 1 or "no room" not in lines[0]:
        fail(f"a worker without --id at a full job: exit {r.returncode}, {r.stderr!r}")
    if job.finish() != 0:
        fail("the job did not go on")
    print("refused: " + lines[0])


def scenario_pull_missing_shard(a, tmp):
    # --pull, and worker 2 cannot see the input (its own mount namespace
    # hides the directory): it exits 2 with one line naming itself and the
    # file, it tells the coordinator, and the coordinator ends the job the
    # same way at once, before any output (not after its join timeout).
    if os.geteuid() != 0 or not shutil.which("unshare"):
        skip("needs root and unshare for a mount namespace")
    data_dir = Path(tmp) / "data"
    data_dir.mkdir()
    data = str(data_dir / "x.npy")
    blobs(data, 200000, 8, 16, 8)
    hide = ["unshare", "--mount", "sh", "-c", f'mount -t tmpfs none "{data_dir}" && exec "$0" "$@"']
    if subprocess.run([*hide, "true"], capture_output=True).returncode != 0:
        skip("no mount namespace here (unshare --mount and mount need CAP_SYS_ADMIN)")
    t0 = time.time()
    job = Job(a, tmp, 3, data, 16, 60, 1000, extra=["--pull"], prefix_of={2: hide})
    code = job.procs[2].wait(timeout=60 * SCALE)
    said = [l for l in (job.tmp / "worker-2.err").read_text().splitlines() if l.strip()]
    if code != 2 or not said or "worker 2" not in said[-1] or "x.npy" not in said[-1]:
        fail(f"worker 2 without the input: exit {code}, {said[-3:]}")
    rc = job.finish()
    took = time.time() - t0
    err = [l for l in (job.tmp / "coordinator.err").read_text().splitlines() if "listening" not in l and "token" not in l]
    if rc != 2 or len(err) != 1 or "worker 2" not in err[0] or "x.npy" not in err[0]:
        fail(f"the coordinator: exit {rc}, {err}")
    if (job.tmp / "centroids.npy").exists():
        fail("the coordinator wrote centroids of a job that did not run")
    if took > 20 * SCALE:
        fail(f"the job took {took:.1f} s to end")
    print(f"worker 2: {said[-1]} (exit 2); the coordinator: {err[0]} (exit 2) after {took:.1f} s")


def read_npy_labels(path):
    data = Path(path).read_bytes()
    hlen = struct.unpack("<H", data[8:10])[0]
    if b"'<i4'" not in data[10:10 + hlen]:
        fail(f"{path}: not int32 labels")
    a = array.array("i")
    a.frombytes(data[10 + hlen:])
    return a


def scenario_labels(a, tmp, pull=True):
    # --output-labels: every member writes its rows' labels into one
    # preallocated file, worker 2 killed -9 mid-job (with --pull its rows
    # move to the survivors, which label them; without, the coordinator
    # stands in and labels them). Every label equals single-node kmeans's,
    # none is left -1, and no FILE.partial remains.
    data = str(Path(tmp) / "x.npy")
    blobs(data, 400000, 8, 16, 8)
    out = Path(tmp) / "labels.npy"
    job = Job(a, tmp, 3, data, 16, 40, 1000, extra=["--output-labels", str(out), *(["--pull"] if pull else [])])
    job.wait_iteration(8)
    job.procs[2].send_signal(signal.SIGKILL)
    job.procs[2].wait()
    if job.finish() != 0:
        fail("coordinator failed: " + (Path(tmp) / "coordinator.err").read_text()[-800:])
    single = Path(tmp) / "single-labels.npy"
    r = subprocess.run([a.accel, "kmeans", "--input", data, "--k", "16", "--max-iter", "40", "--tol", "0",
                        "--init", "random", "--device", "cpu", "--output-labels", str(single)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        fail(r.stderr)
    got, want = read_npy_labels(out), read_npy_labels(single)
    if len(got) != len(want):
        fail(f"{len(got)} labels, single-node {len(want)}")
    differ = sum(1 for p, q in zip(got, want) if p != q)
    if differ or min(got) < 0:
        fail(f"{differ} labels differ from single-node's, smallest {min(got)}")
    if Path(str(out) + ".partial").exists():
        fail("the partial labels file was left behind")
    s = job.summary()
    if s["iterations"] != 40 or s.get("unlabelled") != 0:
        fail(f"summary: {s['iterations']} iterations, {s.get('unlabelled')} unlabelled")
    labelled_by = sorted(w for w, log in job.logs().items() if any(j.get("labels") == "written" for j in log))
    print(f"{len(got)} labels equal single-node's, worker 2 killed; labelling round logged by {labelled_by}")


def scenario_labels_push(a, tmp):
    scenario_labels(a, tmp, pull=False)


def scenario_labels_unwritable(a, tmp):
    # Worker 2 cannot see the labels' directory (its own mount namespace
    # hides it): it exits 2 before round 1 with one line naming itself and
    # the file, the coordinator ends the job the same way, and neither the
    # labels nor their partial file are left.
    if os.geteuid() != 0 or not shutil.which("unshare"):
        skip("needs root and unshare for a mount namespace")
    out_dir = Path(tmp) / "out"
    out_dir.mkdir()
    data = str(Path(tmp) / "x.npy")
    blobs(data, 100000, 8, 16, 8)
    hide = ["unshare", "--mount", "sh", "-c", f'mount -t tmpfs none "{out_dir}" && exec "$0" "$@"']
    if subprocess.run([*hide, "true"], capture_output=True).returncode != 0:
        skip("no mount namespace here (unshare --mount and mount need CAP_SYS_ADMIN)")
    job = Job(a, tmp, 3, data, 16, 60, 1000, extra=["--output-labels", str(out_dir / "labels.npy")],
              prefix_of={2: hide})
    code = job.procs[2].wait(timeout=60 * SCALE)
    said = [l for l in (job.tmp / "worker-2.err").read_text().splitlines() if l.strip()]
    if code != 2 or not said or "worker 2" not in said[-1] or "labels.npy" not in said[-1]:
        fail(f"worker 2 without the output directory: exit {code}, {said[-3:]}")
    rc = job.finish()
    err = [l for l in (job.tmp / "coordinator.err").read_text().splitlines() if "listening" not in l and "token" not in l]
    if rc != 2 or len(err) != 1 or "worker 2" not in err[0] or "labels.npy" not in err[0]:
        fail(f"the coordinator: exit {rc}, {err}")
    left = sorted(p.name for p in out_dir.iterdir())
    if left:
        fail(f"the failed job left {left}")
    print(f"worker 2: {said[-1]} (exit 2); the coordinator: {err[0]} (exit 2); nothing left in the output directory")


def foreign_input(a, tmp, n):
    """The input in its own directory, a command prefix under which that
    directory holds another file of the same shape (a mount namespace), and
    the input's path; skips where that cannot be had."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        skip("needs root and unshare for a mount namespace")
    data_dir = Path(tmp) / "data"
    data_dir.mkdir()
    data = str(data_dir / "x.npy")
    blobs(data, n, 8, 16, 8)
    other = Path(tmp) / "other.npy"
    blobs(str(other), n, 8, 16, 9)  # the same size, other rows
    swap = ["unshare", "--mount", "sh", "-c",
            f'mount -t tmpfs none "{data_dir}" && cp "{other}" "{data}" && exec "$0" "$@"']
    if subprocess.run([*swap, "true"], capture_output=True).returncode != 0:
        skip("no mount namespace here (unshare --mount and mount need CAP_SYS_ADMIN)")
    return data, swap


def scenario_pull_foreign_input(a, tmp):
    # --pull, and worker 2 finds another file of the same size at the
    # input's path: its rows' digest is not the coordinator's, so it exits 2
    # before round 1 with one line naming itself and the file, and the
    # coordinator ends the job the same way, writing nothing.
    data, swap = foreign_input(a, tmp, 200000)
    job = Job(a, tmp, 3, data, 16, 60, 1000, extra=["--pull"], prefix_of={2: swap})
    code = job.procs[2].wait(timeout=60 * SCALE)
    said = [l for l in (job.tmp / "worker-2.err").read_text().splitlines() if l.strip()]
    if code != 2 or not said or "worker 2" not in said[-1] or "x.npy" not in said[-1] or "differ" not in said[-1]:
        fail(f"worker 2 with another input: exit {code}, {said[-3:]}")
    rc = job.finish()
    err = [l for l in (job.tmp / "coordinator.err").read_text().splitlines() if "listening" not in l and "token" not in l]
    if rc != 2 or len(err) != 1 or "worker 2" not in err[0] or "differ" not in err[0]:
        fail(f"the coordinator: exit {rc}, {err}")
    if (job.tmp / "centroids.npy").exists():
        fail("the coordinator wrote centroids of a job that did not run")
    print(f"worker 2: {said[-1]} (exit 2); the coordinator: {err[0]} (exit 2)")


def scenario_joiner_foreign_input(a, tmp):
    # A worker that joins a running --pull job without an id but sees
    # another file at the input's path reads the rows moved to it, finds
    # their digest is not the coordinator's, and exits 2 naming the file,
    # before it computes on them; the job goes on without it and its
    # centroids are the failure-free ones.
    data, swap = foreign_input(a, tmp, 400000)
    # 300 iterations: the job must outlast the joiner's start, its read of
    # the moved rows and their digest (80, about a second, failed once).
    job = Job(a, tmp, 2, data, 16, 300, 1000, extra=["--pull", "--max-workers", "3"], prefix_of={3: swap})
    job.n = 3
    job.wait_iteration(5)
    job.start_worker(3, with_id=False)
    code = job.procs[3].wait(timeout=60 * SCALE)
    said = [l for l in (job.tmp / "worker-3.err").read_text().splitlines() if l.strip()]
    if code != 2 or not said or "x.npy" not in said[-1] or "differ" not in said[-1]:
        fail(f"the joiner with another input: exit {code}, {said[-3:]}")
    if job.finish() != 0:
        fail("coordinator failed: " + (Path(tmp) / "coordinator.err").read_text()[-800:])
    worst = failure_free_difference(a, tmp, data, 16, 300)
    if worst > 1e-6:
        fail(f"centroids {worst:.1e} off the failure-free run")
    print(f"the joiner: {said[-1]} (exit 2); the job finished, centroids within {worst:.1e} of the failure-free run")


def scenario_sigterm_leave_push(a, tmp):
    scenario_sigterm_leave(a, tmp, pull=False)


def failure_free_difference(a, tmp, data, k, iters, init="random"):
    """Largest relative difference between the job's centroids and a
    single-node run's (the failure-free result)."""
    single = Path(tmp) / "single.npy"
    args = ["--k", str(k), "--max-iter", str(iters), "--tol", "0", "--init", init, "--device", "cpu"]
    kept = kept_reference(a, data, args, ".centroids.npy")
    if kept and kept.exists():
        shutil.copyfile(kept, single)
    else:
        r = subprocess.run([a.accel, "kmeans", "--input", data, *args, "--output-centroids", str(single)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            fail(r.stderr)
        if kept:
            keep(kept, single)
    x, y = read_npy_floats(Path(tmp) / "centroids.npy"), read_npy_floats(single)
    return max(abs(p - q) / (1 + abs(q)) for p, q in zip(x, y))


def wait_snapshot(job, w):
    job.wait_for(lambda: any(j.get("event") == "snapshot" for j in jsonl(job.tmp / f"worker-{w}.jsonl")), 30,
                 f"worker {w}'s snapshot")


def kill_at_snapshot(job, workers, restarted):
    """`workers` killed -9 at once past iteration 10, those in `restarted`
    once their snapshot is written (so that they can resume); the iteration
    they were killed at."""
    job.wait_iteration(10)
    for w in restarted:
        wait_snapshot(job, w)
    for w in workers:
        job.procs[w].send_signal(signal.SIGKILL)
    for w in workers:
        job.procs[w].wait()
    return job.iteration()


def scenario_all_lost(a, tmp):
    # Both workers killed for good. With --on-loss move the coordinator
    # computes their rows: exit 0, the failure-free centroids, and a message.
    # With --on-loss drop their rows are not in the result: exit 4 (docs/cluster.md,
    # "Exit codes") and a message, never a silent 0.
    data = str(Path(tmp) / "x.npy")
    blobs(data, int(300000 / SCALE), 8, 16, 13)  # fewer under the sanitizers: the coordinator computes them all
    for on_loss, want in (("move", 0), ("drop", 4)):
        run = Path(tmp) / on_loss
        run.mkdir()
        job = Job(a, run, 2, data, 16, 150, 1000, extra=["--on-loss", on_loss])
        job.wait_iteration(10)
        kill_together(job.procs, (1, 2))
        rc = job.finish()
        err = (run / "coordinator.err").read_text()
        if rc != want or "every worker" not in err:
            fail(f"--on-loss {on_loss}: exit {rc} (want {want}), stderr: {err[-400:]}")
        line = [l for l in err.splitlines() if "every worker" in l][-1]
        print(f"--on-loss {on_loss}: exit {rc}; {line}")
        if on_loss == "move":
            worst = failure_free_difference(a, run, data, 16, 150)
            if worst > 1e-6:
                fail(f"--on-loss move lost rows: centroids {worst:.1e} from the failure-free run")


def scenario_fresh_rejoin(a, tmp):
    # Worker 2 killed and its snapshot lost (a new disk): restarted without
    # one, it says hello to the running job, gets its task and rows from the
    # coordinator, and counts again; the centroids are the failure-free
    # run's (its rows were the coordinator's meanwhile).
    data = str(Path(tmp) / "x.npy")
    blobs(data, 400000, 8, 16, 21)
    job = Job(a, tmp, 3, data, 16, 250, 1000)
    job.wait_iteration(10)
    wait_snapshot(job, 2)
    job.procs[2].send_signal(signal.SIGKILL)
    job.procs[2].wait()
    (job.tmp / "snapshots" / "worker-2.snapshot").unlink()
    job.wait_iteration(job.iteration() + 10)
    job.start_worker(2)
    if job.finish() != 0:
        fail("coordinator failed")
    logs = jsonl(job.coord_log)
    resent = [j for j in logs if j.get("event") == "task_resent"]
    back = [j for j in logs if j.get("event") == "rows_handed_back" and j.get("worker") == 2]
    if not resent or not back:
        fail(f"worker 2 did not join afresh and take its rows back: {resent} {back}")
    if "joining it with its task" not in (job.tmp / "worker-2.err").read_text():
        fail("worker 2 did not say it joined the running job")
    worst = failure_free_difference(a, tmp, data, 16, 250)
    print(f"worker 2 without a snapshot got its task at iteration {resent[0]['iteration']} and its rows back at "
          f"{back[0]['iteration']}; centroids within {worst:.1e} of the failure-free run")
    if worst > 1e-6:
        fail("the centroids differ from the failure-free run")


def scenario_all_lost_return(a, tmp):
    # Every worker lost, then back: the coordinator, computing alone, still
    # answers the network (keepalives, rejoins), so they count again and
    # take their rows back.
    # 3000 rounds (5-8 ms each; they were back by round 513, and by 1374
    # in the slowest run seen), and the job ends at the failure-free
    # centroids, compared as the sibling scenarios do.
    data = str(Path(tmp) / "x.npy")
    blobs(data, 300000, 8, 16, 14)
    iters = 3000
    job = Job(a, tmp, 2, data, 16, iters, 1000)
    job.wait_iteration(10)
    for w in (1, 2):
        wait_snapshot(job, w)
    kill_together(job.procs, (1, 2))
    lost_at = job.iteration()
    time.sleep(3)  # past the keepalive interval (2 s)
    for w in (1, 2):
        job.start_worker(w)
    job.wait_for(lambda: len([j for j in jsonl(job.coord_log) if j.get("event") == "rows_handed_back"]) >= 2, 30,
                 "both workers' rows handed back")
    back = [j["iteration"] for j in jsonl(job.coord_log) if j.get("event") == "rows_handed_back"]
    if job.finish() != 0:
        fail("the coordinator failed after both workers returned: " + (job.tmp / "coordinator.err").read_text()[-600:])
    s = job.summary()
    if s["iterations"] != iters or s["members"]["active"] != [0, 1, 2]:
        fail(f"the job did not end with both workers counting: {s}")
    worst = failure_free_difference(a, tmp, data, 16, iters)
    print(f"both workers lost at iteration {lost_at}; back at iterations {back}; centroids within {worst:.1e} "
          f"of the failure-free run")
    if worst > 1e-6:
        fail("the centroids differ from the failure-free run's")


def scenario_two_killed(a, tmp):
    # Workers 1 and 3 killed at the same moment, then both restarted: each
    # must reach the others (not the other dead worker's old address), and
    # with the coordinator standing in meanwhile the job ends at the
    # failure-free centroids.
    data = str(Path(tmp) / "x.npy")
    blobs(data, 600000, 8, 16, 11)
    job = Job(a, tmp, 3, data, 16, 200, 1000)
    killed_at = kill_at_snapshot(job, (1, 3), restarted=(1, 3))
    job.wait_iteration(killed_at + 20)
    job.start_worker(1)
    job.start_worker(3)
    print(f"killed workers 1 and 3 at iteration {killed_at}, restarted both at iteration {job.iteration()}")
    if job.finish() != 0:
        fail("coordinator failed")
    back = {j["worker"] for j in job.logs()[0] if j.get("event") == "rows_handed_back"}
    if back != {1, 3}:
        fail(f"not both workers came back: rows handed back to {sorted(back)}")
    worst = failure_free_difference(a, tmp, data, 16, 200)
    print(f"both rejoined; centroids within {worst:.1e} of the failure-free run")
    if worst > 1e-6:
        fail("the centroids differ from the failure-free run")


def scenario_gathered(a, tmp):
    """The gathered exchange (--gather-from): 4 workers whose contributions go
    to the coordinator alone. Failure-free, the centroids are the
    all-to-all's bit for bit;
    with worker 2 killed -9 and restarted and worker 3 killed for good, the
    job ends at the failure-free centroids."""
    data = str(Path(tmp) / "x.npy")
    blobs(data, 400000, 8, 16, 21)
    runs = {}
    for name, extra in (("all-to-all", []), ("gathered", ["--gather-from", "2"])):
        (Path(tmp) / name).mkdir()
        job = Job(a, Path(tmp) / name, 4, data, 16, 60, 1000, extra=extra)
        if job.finish() != 0:
            fail(f"{name}: coordinator failed")
        runs[name] = read_npy_floats(job.tmp / "centroids.npy")
    if runs["gathered"] != runs["all-to-all"]:
        fail("the gathered exchange's centroids differ from the all-to-all's")
    job = Job(a, tmp, 4, data, 16, 200, 1000, extra=["--gather-from", "2"])
    killed_at = kill_at_snapshot(job, (2, 3), restarted=(2,))
    job.wait_iteration(killed_at + 15)
    job.start_worker(2)
    if job.finish() != 0:
        fail("coordinator failed")
    if not any(j.get("event") == "resumed" for j in job.logs()[2]):
        fail("worker 2 did not rejoin")
    worst = failure_free_difference(a, tmp, data, 16, 200)
    print(f"gathered: equal to the all-to-all without failures; killed workers 2 and 3 at iteration {killed_at}, "
          f"2 rejoined; centroids within {worst:.1e} of the failure-free run")
    if worst > 1e-6:
        fail("the centroids differ from the failure-free run")


def scenario_kill_during_move(a, tmp):
    # Worker 2 comes back and is killed again the moment its rows are handed
    # back to it: the coordinator stands in for it again and the job ends at
    # the failure-free centroids.
    data = str(Path(tmp) / "x.npy")
    blobs(data, 600000, 8, 16, 12)
    job = Job(a, tmp, 2, data, 16, 250, 1000)
    job.wait_iteration(10)
    wait_snapshot(job, 2)
    job.procs[2].send_signal(signal.SIGKILL)
    job.procs[2].wait()
    job.wait_iteration(job.iteration() + 15)
    job.start_worker(2)
    handed = lambda: [j for j in jsonl(job.coord_log) if j.get("event") == "rows_handed_back"]  # noqa: E731
    job.wait_for(lambda: handed(), 60, "worker 2's rows to be handed back")
    job.procs[2].send_signal(signal.SIGKILL)
    job.procs[2].wait()
    print(f"worker 2 killed again at iteration {job.iteration()}, as its rows were handed back to it")
    if job.finish() != 0:
        fail("coordinator failed")
    taken = [j for j in job.logs()[0] if j.get("event") == "rows_taken_over"]
    if len(taken) < 2:
        fail(f"the coordinator did not stand in for worker 2 twice: {taken}")
    worst = failure_free_difference(a, tmp, data, 16, 250)
    print(f"stood in from iterations {[j['iteration'] for j in taken]}; centroids within {worst:.1e} of the "
          f"failure-free run")
    if worst > 1e-6:
        fail("the centroids differ from the failure-free run")


def scenario_nothing_lost_drop(a, tmp):
    scenario_nothing_lost(a, tmp, "drop")


def scenario_pull_moves_restart(a, tmp):
    scenario_pull_moves(a, tmp, restart=True)


def scenario_rebalance(a, tmp):
    # Coordinator on core 0, one worker on core 1, one thread each; from round 20 the worker computes
    # at a third of its speed (ACCEL_FAULT_SLOW_ROUNDS; at half, the re-split came once only after
    # 88 rounds). It must lose rows to the coordinator (Algorithm 1 of
    # [SysInfo] on the measured rates) and the
    # iterations must get faster again. Printed: how close the iterations come to the ideal split's,
    # estimated from each side's measured rate (rows / computing seconds) before and after.
    # (A busy process on core 1 slowed the worker by chance: with the faster cpu loops of issue 18
    # an iteration was 4 ms, the scheduler let the worker that sleeps at the barrier run first, and
    # in a slow spell of this shared host the slowdown was 1.3x; 1 run in 5 failed, and 2 in 5 at
    # 15 ms iterations.) K = 256 keeps computing most of an iteration: at K = 64 synchronizing was,
    # and an injected 2x showed as 0.8-1.4x (1 run in 6 failed).
    if os.cpu_count() < 2 or not shutil.which("taskset"):
        skip("needs 2 cores and taskset")
    data = str(Path(tmp) / "x.npy")
    n = 1000000
    blobs(data, n, 8, 16, 9)
    os.environ["OMP_NUM_THREADS"] = "1"
    slowed_at = 20
    job = Job(a, tmp, 1, data, 256, 120, 5000, pin=True,
              worker_env={1: {"ACCEL_FAULT_SLOW_ROUNDS": f"{slowed_at}:3"}})
    if job.finish() != 0:
        fail("coordinator failed")
    coord = jsonl(job.coord_log)
    # Re-splits after the slowdown (one before it follows noise: CI's
    # machine re-split at iteration 16 of a quiet run, and the test then
    # compared the wrong iterations).
    # Judged by the re-splits with rounds after them to measure (a late one,
    # noise on a loaded machine near round 120, left none: an IndexError in
    # CI under ctest -j2).
    splits = [j for j in coord if j.get("event") == "resplit" and slowed_at < j["iteration"] <= 120 - 12]
    if not splits:
        fail("the slowed worker kept its rows: no re-split after the slowdown")
    med = lambda v: sorted(v)[len(v) // 2]  # noqa: E731
    t = {j["iteration"]: j["t_s"] for j in coord if j.get("participant") == 0}
    per = {i: t[i] - t[i - 1] for i in t if i - 1 in t}  # iteration i's duration
    first, last = splits[0]["iteration"], splits[-1]["iteration"]
    before = [per[i] for i in range(5, slowed_at - 1)]
    # Up to the first re-split's round itself (computed on the old rows): slowed rounds alternate
    # long and short here, and a re-split two rounds in left one short round to judge by.
    slowed = [per[i] for i in range(slowed_at + 1, first + 1)]
    after = [per[i] for i in range(last + 2, last + 40) if i in per]
    comp = {w: {j["iteration"]: j["computing_s"] for j in jsonl(job.tmp / f"{name}.jsonl") if "computing_s" in j}
            for w, name in ((0, "coordinator"), (1, "worker-1"))}
    rows_b = job.summary()["rows"]
    rows_a = [n - splits[-1]["kept"][1], splits[-1]["kept"][1]]
    rate = lambda rows, w, its: rows / med([comp[w][i] for i in its if i in comp[w]])  # noqa: E731
    its_b, its_a = range(5, slowed_at - 1), range(last + 2, last + 40)
    sum_b = rate(rows_b[0], 0, its_b) + rate(rows_b[1], 1, its_b)
    sum_a = rate(rows_a[0], 0, its_a) + rate(rows_a[1], 1, its_a)
    ideal = med(before) * sum_b / sum_a
    within = next((i for i in range(slowed_at, max(per) + 1) if i in per and per[i] <= 1.3 * ideal
                   and i > first), None)
    print(f"slowed at iteration {slowed_at}, re-split at {[s['iteration'] for s in splits]}: worker 1 keeps "
          f"{rows_a[1]} of {rows_b[1]} rows; median iteration {med(before) * 1e3:.1f} ms before, "
          f"{med(slowed) * 1e3:.1f} ms slowed, {med(after) * 1e3:.1f} ms after; ideal split ~{ideal * 1e3:.1f} ms "
          f"(after/ideal {med(after) / ideal:.2f}); first iteration within 1.3x of ideal: "
          f"{within} ({None if within is None else within - slowed_at} after the slowdown)")
    if not med(after) < 0.9 * med(slowed):
        fail("the iterations did not get faster after the re-split")


def scenario_partial_send(a, tmp, on_loss="move"):
    # Worker 2 dies in the middle of round 10's notification phase: its
    # contribution reaches the coordinator and worker 1, never workers 3 and
    # 4 (ACCEL_FAULT_PARTIAL_SEND). Every participant must still count round
    # 10 alike -- what the coordinator counted, which 3 and 4 ask it for --
    # so no survivor stalls, parts from the others, or is evicted; with
    # --on-loss move the job ends at the failure-free centroids.
    data = str(Path(tmp) / "x.npy")
    blobs(data, 400000, 8, 16, 21)
    job = Job(a, tmp, 4, data, 16, 40, 1000, extra=["--on-loss", on_loss],
              worker_env={2: {"ACCEL_FAULT_PARTIAL_SEND": "10:2"}})
    if job.finish() != 0 and on_loss == "move":
        fail("coordinator failed")
    if "dying in round 10 after 2 sends" not in (job.tmp / "worker-2.err").read_text():
        fail("the fault was not injected")
    s = job.summary()
    if s["members"]["active"] != [0, 1, 3, 4]:
        fail(f"a survivor was lost: {s['members']}")
    check_agreement(job, {0, 1, 3, 4})
    check_same_result(job, {0, 1, 3, 4})
    check_no_stall(job, {0, 1, 3, 4})
    if on_loss == "move":
        worst = failure_free_difference(a, tmp, data, 16, 40)
        print(f"centroids within {worst:.1e} of the failure-free run")
        if worst > 1e-6:
            fail("the centroids differ from the failure-free run")
    print(f"worker 2 died mid-send in round 10 (--on-loss {on_loss}); survivors counted alike and stayed")


def scenario_partial_send_drop(a, tmp):
    scenario_partial_send(a, tmp, on_loss="drop")


def scenario_kill_restart_rows(a, tmp):
    scenario_kill_restart(a, tmp, snapshot_rows=True)


def scenario_stale_snapshot(a, tmp, snapshot_rows=False):
    # A worker crashes and leaves its snapshot; a later job with the same
    # token (the launcher's, ACCEL_JOB_TOKEN) starts with that snapshot in place. The worker's resume
    # is rejected (nothing is running to resume), it discards the snapshot
    # and joins the new job afresh, which then runs with every worker.
    os.environ["ACCEL_JOB_TOKEN"] = "7"
    data = str(Path(tmp) / "x.npy")
    blobs(data, 200000, 8, 8, 3)
    extra = ["--snapshot-rows"] if snapshot_rows else []
    first = Path(tmp) / "first"
    first.mkdir()
    job = Job(a, first, 2, data, 16, 100000, 1000, worker_extra=extra)
    job.wait_for(lambda: any(j.get("event") == "snapshot" for j in jsonl(job.tmp / "worker-2.jsonl")), 30,
                 "worker 2's snapshot")
    job.kill_all()  # the whole first job crashes
    for p in [job.coord, *job.procs.values()]:
        p.wait()
    snap = first / "snapshots" / "worker-2.snapshot"
    if not snap.exists():
        fail("the first job left no snapshot to test with")
    second = Path(tmp) / "second"
    (second / "snapshots").mkdir(parents=True)
    shutil.copy(snap, second / "snapshots" / "worker-2.snapshot")
    t0 = time.time()
    job = Job(a, second, 2, data, 16, 10, 1000, worker_extra=extra)
    if job.finish(60) != 0:
        fail("the second job failed: " + (second / "coordinator.err").read_text()[-500:])
    err = (second / "worker-2.err").read_text()
    if "stale snapshot discarded" not in err:
        fail("worker 2 did not discard its stale snapshot: " + err[-500:])
    s = job.summary()
    if s["members"]["active"] != [0, 1, 2] or s["iterations"] != 10:
        fail(f"unexpected summary of the second job: {s}")
    if (second / "snapshots" / "worker-2.snapshot").exists():
        fail("worker 2's snapshot is still there after the job")
    print(f"stale snapshot discarded; the second job ran with every worker in {time.time() - t0:.1f} s")


def scenario_stale_snapshot_rows(a, tmp):
    scenario_stale_snapshot(a, tmp, snapshot_rows=True)


def scenario_sigstop(a, tmp, snapshot_fails=False):
    data = str(Path(tmp) / "x.npy")
    blobs(data, 100000, 8, 8, 3)
    # k = 1024: iterations long enough (k = 128 ran 2 ms ones, and the job
    # ended inside the stop) that the job outlasts the 2.5 s stop and the
    # rejoin: 400 of about 20 ms here, where worker 1 rejoined at ~120.
    job = Job(a, tmp, 3, data, 1024, 400, 700)
    job.wait_iteration(5)
    if snapshot_fails:
        # Every later save of worker 1's snapshot fails (a directory where its
        # temporary file goes: refused even for root), as on a full disk.
        wait_snapshot(job, 1)
        (job.tmp / "snapshots" / f"worker-1.snapshot.tmp.{job.procs[1].pid}").mkdir()
    job.procs[1].send_signal(signal.SIGSTOP)
    stopped_at = job.iteration()
    time.sleep(2.5)  # well past the 0.7 s timeout
    job.procs[1].send_signal(signal.SIGCONT)
    print(f"stopped worker 1 at iteration {stopped_at} for 2.5 s")
    if job.finish() != 0:
        fail("coordinator failed")
    logs = job.logs()
    evicted = [j["iteration"] for j in logs[0] if 1 in j.get("evicted", [])]
    if not evicted:
        fail("worker 1 was never evicted")
    rejoins = [j for j in logs[0] if j.get("event") == "rejoin" and j["worker"] == 1]
    if not rejoins or rejoins[0]["incarnation"] < 2:
        fail(f"worker 1 did not rejoin with a new incarnation: {rejoins}")
    err = (Path(tmp) / "coordinator.err").read_text() + "".join(
        (Path(tmp) / f"worker-{i}.err").read_text() for i in (2, 3))
    if "dropped stale partial" not in err and "incarnation" not in err:
        print("note: no stale message reached a survivor before the rejoin (nothing to reject)")
    s = job.summary()
    if 1 not in s["members"]["active"]:
        fail(f"worker 1 is not active at the end: {s['members']}")
    print(f"evicted at iteration {evicted[0]}, rejoined as incarnation {rejoins[0]['incarnation']} "
          f"at iteration {rejoins[0].get('iteration')} of 400")
    if snapshot_fails:
        err1 = (Path(tmp) / "worker-1.err").read_text()
        if "could not update the snapshot" not in err1:
            fail("worker 1's snapshot save did not fail as arranged: " + err1[-300:])
        print("worker 1 could not update its snapshot and rejoined with the one in memory")
    check_agreement(job, {0, 2, 3})
    check_same_result(job, {0, 2, 3})
    check_no_stall(job, {0, 2, 3})


def scenario_sigstop_snapshot_fails(a, tmp):
    scenario_sigstop(a, tmp, snapshot_fails=True)


def scenario_coordinator_kill(a, tmp):
    data = str(Path(tmp) / "x.npy")
    blobs(data, 300000, 8, 8, 4)
    job = Job(a, tmp, 3, data, 8, 500, 1000)
    job.wait_iteration(5)
    job.coord.send_signal(signal.SIGKILL)
    t0 = time.time()
    for i, p in job.procs.items():
        try:
            rc = p.wait(timeout=job.timeout_ms / 1000 + 5)
        except subprocess.TimeoutExpired:
            job.kill_all()
            fail(f"worker {i} still running {time.time() - t0:.1f} s after the coordinator died")
        err = (Path(tmp) / f"worker-{i}.err").read_text()
        print(f"worker {i}: exit {rc} after {time.time() - t0:.2f} s: {err.strip().splitlines()[-1] if err.strip() else ''}")
        if rc == 0:
            fail(f"worker {i} exited 0 without a coordinator")
        if "coordinator" not in err:
            fail(f"worker {i} gave no clear message: {err}")


def scenario_coordinator_restart(a, tmp, lose_worker=False):
    # kill -9 the coordinator at iteration 10 and restart it with --resume:
    # the workers wait for it (--coordinator-timeout), rejoin, recompute
    # from the checkpoint's round, and the job ends at the failure-free
    # centroids (within 1e-6), every process exiting 0. lose_worker: worker
    # 2 dies too while the coordinator is down; the resumed coordinator
    # stands in for its rows until it is restarted and rejoins.
    data = str(Path(tmp) / "x.npy")
    blobs(data, 600000, 8, 16, 21)
    ckpt = Path(tmp) / "checkpoint"
    # 150 rounds: with 60 the restarted worker 2 had 34 rounds (~0.1-0.2 s with the cpu loops of
    # issue 18) to start and rejoin, and once joined as the job ended (1 run in ~14, beside other
    # tests) it missed the coordinator's done and polled for the coordinator until its timeout.
    iters = 150
    job = Job(a, tmp, 3, data, 64, iters, 1000, extra=["--checkpoint-dir", str(ckpt), "--mtbf", "1"],
              worker_extra=["--coordinator-timeout", str(int(60000 * SCALE))])
    job.wait_iteration(10)
    if lose_worker:
        wait_snapshot(job, 2)
    job.coord.send_signal(signal.SIGKILL)
    job.coord.wait()
    killed_at = job.iteration()
    if lose_worker:
        job.procs[2].send_signal(signal.SIGKILL)
        job.procs[2].wait()
    saved = [j["iteration"] for j in jsonl(job.coord_log) if j.get("event") == "checkpoint"]
    if not saved or saved[0] != 0:
        fail(f"no checkpoint before round 1: {saved}")
    print(f"killed the coordinator at iteration {killed_at}; checkpoints at rounds {saved}")
    time.sleep(1.0)  # down for a while: every worker finds it gone and polls
    job.start_coordinator(["--resume", str(ckpt)])
    back = [1, 3] if lose_worker else [1, 2, 3]
    if lose_worker:
        job.wait_for(lambda: any(j.get("event") == "resumed" for j in jsonl(job.coord_log)), 30, "the resume")
        job.wait_iteration(killed_at + 15)
        job.start_worker(2)
    if job.finish() != 0:
        fail("the resumed coordinator failed: " + (job.tmp / "coordinator.err").read_text()[-600:])
    for i, p in job.procs.items():
        if p.returncode != 0:
            fail(f"worker {i} exited {p.returncode}: " + (job.tmp / f"worker-{i}.err").read_text()[-400:])
    resumed = [j for j in jsonl(job.coord_log) if j.get("event") == "resumed"]
    # From the last checkpoint on disk: the last one logged, or one the kill
    # came between writing and logging, but never past the rounds done.
    if (len(resumed) != 1 or not saved[-1] + 1 <= resumed[0]["iteration"] <= killed_at + 1
            or resumed[0]["workers_back"] != back):
        fail(f"the coordinator did not resume from its last checkpoint with workers {back}: {resumed}, "
             f"logged checkpoints {saved}, killed after round {killed_at}")
    s = job.summary()
    if s["iterations"] != iters or s["members"]["active"] != [0, 1, 2, 3]:
        fail(f"the resumed job did not end with every member after {iters} rounds: {s}")
    # From the resumed round on, every member counted in every round: the
    # workers came back together and no one was evicted.
    t0 = resumed[0]["iteration"]
    for pid, lines in job.logs().items():
        after = [j for j in lines if "members" in j]
        late = [j["iteration"] for j in after[-(iters - t0 + 1):] if j["members"]["active"] != [0, *back]]
        if late and not lose_worker:
            fail(f"participant {pid} counted without every member after the resume, at rounds {late}")
    if lose_worker:
        taken = [j for j in jsonl(job.coord_log) if j.get("event") == "rows_taken_over" and j["iteration"] == t0]
        if [j["worker"] for j in taken] != [2]:
            fail(f"the resumed coordinator did not stand in for worker 2 from round {t0}: {taken}")
    check_same_result(job, {0, 1, 2, 3})
    worst = failure_free_difference(a, tmp, data, 64, iters)
    print(f"resumed at round {resumed[0]['iteration']} with workers {resumed[0]['workers_back']}; "
          f"centroids within {worst:.1e} of the failure-free run")
    if worst > 1e-6:
        fail("the centroids differ from the failure-free run")


def scenario_resume_refuses(a, tmp):
    """Issue 34: a resume with another --seed had run on with the checkpoint's
    centroids and exited 0; with another --k it started and failed rounds
    later; with rows changed in the middle of the input it exited 0 with
    other centroids. Each is refused before anything starts: exit 2 within
    1 s, the option or the file named, no output written. The original
    command then resumes and finishes."""
    data = Path(tmp) / "x.npy"
    blobs(str(data), 300000, 8, 8, 31)
    ckpt = Path(tmp) / "checkpoint"
    job = Job(a, tmp, 2, str(data), 8, 400, 1000, extra=["--checkpoint-dir", str(ckpt), "--mtbf", "1", "--seed", "3"],
              worker_extra=["--coordinator-timeout", str(int(60000 * SCALE))])
    job.wait_iteration(10)
    job.coord.send_signal(signal.SIGKILL)
    job.coord.wait()
    out = Path(tmp) / "centroids.npy"
    if out.exists():
        out.unlink()
    changed = Path(tmp) / "changed.npy"
    raw = bytearray(data.read_bytes())
    mid = len(raw) // 2
    raw[mid:mid + 4096] = bytes(4096)  # rows in the middle, same size
    changed.write_bytes(bytes(raw))

    def resume(swap, what):
        cmd = [x for x in job.coord_cmd]
        for flag, value in swap:
            if flag in cmd:
                cmd[cmd.index(flag) + 1] = value
            else:
                cmd += [flag, value]
        t0 = time.time()
        r = subprocess.run(cmd + ["--resume", str(ckpt)], capture_output=True, text=True, timeout=60)
        seconds = time.time() - t0
        last = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
        print(f"resume with {' '.join(f + ' ' + v for f, v in swap)}: exit {r.returncode} in {seconds:.2f} s: {last}")
        if r.returncode != 2 or what not in last:
            fail(f"exit {r.returncode}, want 2 naming {what}: {r.stderr[-600:]}")
        if seconds > 1.0 * SCALE:
            fail(f"refused after {seconds:.2f} s (want within 1 s)")
        if out.exists():
            fail("a refused resume wrote the output")

    resume([("--seed", "4")], "--seed")
    resume([("--k", "16")], "--k")
    resume([("--max-iter", "300")], "--max-iter")
    resume([("--input", str(changed))], str(changed))
    job.start_coordinator(["--resume", str(ckpt)])  # the original: resumes and finishes
    if job.finish() != 0:
        fail("the original resume failed: " + (job.tmp / "coordinator.err").read_text()[-600:])
    if not out.exists():
        fail("the original resume wrote no centroids")


def scenario_coordinator_restart_worker_lost(a, tmp):
    scenario_coordinator_restart(a, tmp, lose_worker=True)


def scenario_intruder(a, tmp):
    data = str(Path(tmp) / "x.npy")
    blobs(data, 300000, 8, 8, 5)
    # A long timeout: the attackers (a UCX context each, a worker process)
    # take the CPU of this 2-core host, and the test is about refusals.
    job = Job(a, tmp, 2, data, 8, 200, 5000)  # outlasts the attacks
    job.wait_iteration(5)
    r = subprocess.run([a.intruder, "127.0.0.1", str(job.port), str(job_token(job.port)), str(job.iteration() + 1)],
                       capture_output=True, text=True, timeout=60)
    print(r.stdout.strip())
    w = subprocess.run([a.accel, "worker", "--coordinator", job.addr, "--id", "1", "--job", "12345"],
                       capture_output=True, text=True, timeout=60)
    if w.returncode != 2 or "refused it" not in w.stderr:
        fail(f"a worker with another job's token: exit {w.returncode}, {w.stderr.strip()}")
    print("a worker with another job's token:", w.stderr.strip())
    if job.finish() != 0:
        fail("coordinator failed after the intruder")
    # The forged contributions of worker 2 (sums of 1e30) did not count.
    worst = failure_free_difference(a, tmp, data, 8, 200)
    print(f"centroids within {worst:.1e} of the failure-free run")
    if worst > 1e-6:
        fail("a forged contribution changed the result")
    err = (Path(tmp) / "coordinator.err").read_text()
    for needle in ("refused a connection", "wrong job token", "dropped", "not sealed", "its seal does not verify"):
        if needle not in err:
            fail(f"coordinator log lacks '{needle}':\n{err}")
    s = job.summary()
    if s["members"]["active"] != [0, 1, 2] or s["iterations"] != 200:
        fail(f"the job did not go on normally: {s}")
    print("rejected:", *[l for l in err.splitlines() if "drop" in l or "reject" in l or "refused" in l][:8], sep="\n  ")


class FrontDoorAttack:
    """Connections that hold the coordinator's front door without a token:
    `idle` that say nothing, `slow` that send the greeting's first bytes one
    every 1.5 s, each reopened as soon as the door drops it. Threads, bounded
    by stop()."""

    def __init__(self, port, idle=20, slow=50):
        self.port, self.stop_flag, self.opened = port, threading.Event(), 0
        self.threads = [threading.Thread(target=self.hold, args=(False,), daemon=True) for _ in range(idle)]
        self.threads += [threading.Thread(target=self.hold, args=(True,), daemon=True) for _ in range(slow)]
        for t in self.threads:
            t.start()

    def hold(self, slow):
        while not self.stop_flag.is_set():
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=5) as c:
                    self.opened += 1
                    c.settimeout(0.1)
                    sent = 0
                    last = time.time()
                    while not self.stop_flag.is_set():
                        if slow and time.time() - last >= 1.5:
                            c.send(b"ACCELB1\0"[sent % 8:sent % 8 + 1])
                            sent, last = sent + 1, time.time()
                        try:
                            if c.recv(4096) == b"":
                                break  # dropped: open another
                        except socket.timeout:
                            pass
            except OSError:
                time.sleep(0.05)

    def stop(self):
        self.stop_flag.set()
        for t in self.threads:
            t.join(timeout=10)


def scenario_front_door(a, tmp):
    """Issue 34's target: 20 idle connections and 50 byte-a-second ones,
    reopened when dropped, held against the front door from before the
    workers join; worker 2 killed and restarted mid-job must rejoin through
    it. The job completes with the quiet run's result, in at most 1.5x its
    time (docs/cluster.md: Joining a job)."""
    data = str(Path(tmp) / "x.npy")
    blobs(data, 400000, 8, 8, 12)

    def run(sub, attack):
        d = Path(tmp) / sub
        d.mkdir()
        held = []
        t0 = time.time()
        job = Job(a, d, 2, data, 8, 1500, 2000,
                  on_listen=(lambda j: held.append(FrontDoorAttack(j.port))) if attack else None)
        try:
            job.wait_iteration(600)  # past the first 2 s: the door has dropped and let in attackers meanwhile
            job.procs[2].kill()
            job.procs[2].wait()
            job.start_worker(2)  # rejoins through the same door
            rc = job.finish()
        finally:
            for h in held:
                h.stop()
        seconds = time.time() - t0
        if rc != 0:
            fail(f"{sub}: coordinator exit {rc}: " + (d / "coordinator.err").read_text()[-2000:])
        s = job.summary()
        if s["iterations"] != 1500 or s["members"]["active"] != [0, 1, 2]:
            fail(f"{sub}: the job did not go on normally: {s}")
        return seconds, read_npy_floats(d / "centroids.npy"), d, (held[0].opened if held else 0)

    # One quiet run's time varies by ~25% here (when the kill lands against
    # the timeout), and CI runs another test beside this one. A single pair
    # once read 1.53x where its median is ~1.0x, so a pair over the bound is
    # confirmed by two more, and the median ratio of the three is judged.
    ratios = []
    for pair in range(3):
        quiet, want, _, _ = run(f"quiet{pair}", False)
        attacked, got, d, opened = run(f"attacked{pair}", True)
        worst = max(abs(p - q) / (1 + abs(q)) for p, q in zip(got, want))
        err = (d / "coordinator.err").read_text()
        lines = sum(1 for l in err.splitlines() if "refused" in l)
        ratios.append(attacked / quiet)
        print(f"front door: quiet {quiet:.2f} s, under attack {attacked:.2f} s ({attacked / quiet:.2f}x; "
              f"{opened} attacking connections opened, {lines} refusal lines); centroids within {worst:.1e}")
        if worst > 1e-6:
            fail("the attacked run's centroids differ from the quiet run's")
        if lines > 60:
            fail(f"{lines} refusal lines: not bounded")
        if ratios[0] <= 1.5:
            return
    median = sorted(ratios)[1]
    if median > 1.5:
        fail(f"under attack the job took a median {median:.2f}x its quiet time over 3 pairs (need <= 1.5x)")


def netns_job(a, tmp, delay_ms):
    """3 workers in their own namespaces over tcp. With delay_ms, every
    worker's link delays its messages (netem), or, where this kernel has no
    netem, is a 64 kbit/s link (tbf) whose queue holds each iteration's
    partials ~0.25 s: late messages, below the timeout, must not evict."""
    if os.geteuid() != 0:
        skip("needs root for network namespaces")
    if subprocess.run(["ip", "netns", "add", "accel-probe"], capture_output=True).returncode != 0:
        skip("ip netns is not available here")
    shaping = []
    try:
        for probe in (["link", "add", "probe-br", "type", "bridge"],
                      ["link", "add", "probe2", "type", "veth", "peer", "name", "probe3"]):
            r = subprocess.run(["ip", "-n", "accel-probe", *probe], capture_output=True, text=True)
            if r.returncode != 0:
                skip(f"cannot create a {probe[3]} link here: {r.stderr.strip()}")
        if delay_ms:
            subprocess.run(["ip", "-n", "accel-probe", "link", "add", "probe0", "type", "veth", "peer", "name", "probe1"],
                           capture_output=True)
            tc = ["ip", "netns", "exec", "accel-probe", "tc", "qdisc", "add", "dev", "probe0", "root"]
            if subprocess.run(tc + ["netem", "delay", "1ms"], capture_output=True).returncode == 0:
                shaping = ["--delay-ms", str(delay_ms)]
                what = f"{delay_ms} ms netem delay"
            else:
                r = subprocess.run(tc + ["tbf", "rate", "64kbit", "burst", "1600", "latency", "10s"],
                                   capture_output=True, text=True)
                if r.returncode != 0:
                    skip("neither tc netem nor tc tbf is available in this kernel: " + r.stderr.strip())
                shaping = ["--rate-kbit", "64"]
                what = "64 kbit/s links (tbf; this kernel has no netem)"
        else:
            what = "no shaping"
    finally:
        subprocess.run(["ip", "netns", "del", "accel-probe"], capture_output=True)
    data = str(Path(tmp) / "x.npy")
    blobs(data, 100000, 8, 8, 6)
    env = dict(os.environ, ACCEL_BIN=a.accel, ACCEL_CLUSTER_DIR=str(Path(tmp) / "run"))
    cmd = [str(Path(a.scripts) / "cluster.sh"), "3", "--netns", *shaping]
    cmd += ["--", "--input", data, "--k", "8", "--max-iter", "30", "--tol", "0", "--timeout-ms", "1500", "--device",
            "cpu", "--json"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=150)
    print(r.stdout.strip()[-400:])
    if r.returncode != 0:
        fail("cluster.sh --netns failed: " + r.stderr[-800:])
    coord = jsonl(Path(tmp) / "run" / "coordinator.jsonl")
    evicted = [j for j in coord if j.get("evicted")]
    if evicted:
        fail(f"evictions with {what}, below the timeout: {evicted[0]}")
    waits = sorted(j["barrier_wait_s"] for j in coord if "barrier_wait_s" in j)
    if len(waits) != 30:
        fail(f"{len(waits)} iterations logged, expected 30")
    median = waits[len(waits) // 2]
    if shaping and median < 0.010:
        fail(f"median barrier wait {median * 1e3:.1f} ms with {what}: the shaping did not take effect")
    print(f"30 iterations across 3 namespaces (UCX_TLS=tcp, {what}), no eviction; "
          f"median barrier wait {median * 1e3:.1f} ms")


def scenario_netns(a, tmp):
    netns_job(a, tmp, 0)


def scenario_netns_delay(a, tmp):
    netns_job(a, tmp, 20)


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
    global TMP
    with tempfile.TemporaryDirectory(prefix=f"accel-{a.scenario}-") as tmp:
        TMP = tmp
        try:
            fn(a, tmp)
        finally:
            kill_started()
            if os.environ.get("ACCEL_KEEP_LOGS"):  # for debugging: keep the run's logs
                subprocess.run(["rm", "-rf", f"/tmp/kept-{a.scenario}"])
                subprocess.run(["cp", "-r", tmp, f"/tmp/kept-{a.scenario}"])
    print("PASS")


if __name__ == "__main__":
    main()
