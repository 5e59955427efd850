"""accel.dask.KMeans on a dask.distributed LocalCluster: the centroids of
single-node accel.sklearn.KMeans (k-means||, the same random_state), rows
never through the client, a Dask worker killed mid-fit, and bad
collections refused before any worker runs."""
import os
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest

dask = pytest.importorskip("dask", reason="dask is not installed (scripts/setup.sh installs python3-dask)")
distributed = pytest.importorskip("distributed", reason="distributed is not installed (python3-distributed)")
import dask.array as da  # noqa: E402
import dask.dataframe as dd  # noqa: E402
from distributed import Client, LocalCluster  # noqa: E402

import accel.sklearn  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
ACCEL = str(os.environ.get("ACCEL_BIN", REPO / "build" / "bin" / "accel"))
import accel.dask as adask  # noqa: E402


@pytest.fixture(scope="module")
def client():
    # Threads 1 a worker: each runs one accel member beside its tasks.
    with LocalCluster(n_workers=3, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster, Client(cluster) as c:
        yield c


def blobs(n, d, k, seed):
    rng = np.random.default_rng(seed)
    centers = rng.normal(0, 10, (k, d))
    return (centers[rng.integers(0, k, n)] + rng.normal(0, 1, (n, d))).astype(np.float32)


def single_node(x, k, seed, max_iter=100):
    return accel.sklearn.KMeans(k, init="k-means||", n_init=1, random_state=seed, max_iter=max_iter).fit(x)


def test_equals_single_node(client):
    x = blobs(60000, 8, 6, 1)
    X = da.from_array(x, chunks=(7000, 8))  # ragged last chunk, 9 chunks on 3 workers
    km = adask.KMeans(6, random_state=3, max_iter=100, client=client, accel_bin=ACCEL, timeout_ms=5000).fit(X)
    ref = single_node(x, 6, 3)
    np.testing.assert_allclose(km.cluster_centers_, ref.cluster_centers_, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(km.labels_, ref.labels_)
    assert km.n_iter_ == ref.n_iter_
    assert km.inertia_ == pytest.approx(ref.inertia_, rel=1e-6)
    assert km.summary_["members"]["active"] == [0, 1, 2, 3]
    np.testing.assert_array_equal(km.predict(X).compute(), ref.labels_)
    assert km.transform(X).shape == (60000, 6)


def test_dataframe(client):
    x = blobs(20000, 4, 3, 2)
    df = dd.from_pandas(__import__("pandas").DataFrame(x, columns=list("abcd")), npartitions=5)
    km = adask.KMeans(3, random_state=0, client=client, accel_bin=ACCEL, timeout_ms=5000).fit(df)
    np.testing.assert_allclose(km.cluster_centers_, single_node(x, 3, 0).cluster_centers_, rtol=1e-6, atol=1e-6)


def test_worker_killed_mid_fit(client):
    # A Dask worker SIGKILLed while the rounds run: its accel member dies
    # with it, and the survivors read its rows from its parts.
    x = blobs(400000, 16, 8, 4)
    X = da.from_array(x, chunks=(50000, 16))
    # 400 rounds: the fit outlasts the second before the kill on a fast host
    # (150 ended first on an Intel AVX-512 one).
    ref = single_node(x, 8, 5, max_iter=400)
    km = adask.KMeans(8, random_state=5, max_iter=400, tol=0, client=client, accel_bin=ACCEL, timeout_ms=1500)
    pids = client.run(os.getpid)
    victim = sorted(pids)[-1]
    done = threading.Event()

    def member_of(pid):
        # an accel member runs beside it (a child of one of its threads)
        for proc in Path("/proc").glob("[0-9]*"):
            try:
                ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
                if ppid == pid and b"worker" in (proc / "cmdline").read_bytes().split(b"\0"):
                    return True
            except (OSError, IndexError, ValueError):
                pass
        return False

    def kill_when_running():
        deadline = time.monotonic() + 60
        while not done.is_set() and time.monotonic() < deadline:
            if member_of(pids[victim]):
                time.sleep(1.0)  # mid-fit, or before round 1 on a slow host: then its member runs elsewhere
                os.kill(pids[victim], signal.SIGKILL)
                return
            time.sleep(0.02)

    killer = threading.Thread(target=kill_when_running)
    killer.start()
    try:
        km.fit(X)
    finally:
        done.set()
        killer.join()
    assert km.n_iter_ == 400
    assert victim not in client.scheduler_info()["workers"], "the worker was not killed"
    np.testing.assert_allclose(km.cluster_centers_, ref.cluster_centers_, rtol=1e-6, atol=1e-5)
    client.wait_for_workers(3, timeout=60)  # the nanny restarts it for the next tests


@pytest.mark.parametrize("bad, message", [
    (da.from_array(np.array([["a", "b"], ["c", "d"]])), "dtype='numeric' is not compatible"),
    (da.ones(10, chunks=5), "Expected 2D array"),
])
def test_bad_collections_refused_before_workers_run(client, bad, message):
    with pytest.raises(ValueError, match=message):
        adask.KMeans(2, client=client, accel_bin=ACCEL).fit(bad)


def test_unknown_chunk_sizes_refused(client):
    X = da.from_array(np.ones((40, 3), np.float32), chunks=10)
    X = X[X[:, 0] > 0]  # chunk sizes unknown until computed
    with pytest.raises(ValueError, match="unknown"):
        adask.KMeans(2, client=client, accel_bin=ACCEL).fit(X)


def libsvm_file(path, x, y):
    with open(path, "w") as f:
        for row, label in zip(x, y):
            f.write(" ".join([str(int(label))] + [f"{j + 1}:{row[j]:.9g}" for j in np.flatnonzero(row)]) + "\n")


def test_svc_equals_single_node(client, tmp_path):
    rng = np.random.default_rng(7)
    x = rng.normal(0, 1, (3000, 10)).astype(np.float32)
    y = np.where(x[:, 0] + 0.5 * x[:, 1] ** 2 + 0.3 * rng.normal(0, 1, 3000) > 0.4, 5, -1)
    X, Y = da.from_array(x, chunks=(700, 10)), da.from_array(y, chunks=700)
    clf = adask.SVC(C=4.0, client=client, accel_bin=ACCEL, timeout_ms=5000).fit(X, Y)
    ref = accel.sklearn.SVC(C=4.0).fit(x, y)
    assert list(clf.classes_) == [-1, 5]
    assert clf._gamma == pytest.approx(ref._gamma, rel=1e-6)  # X.var() of float32 rows, summed in float64 here
    # At most 0.1% of the support vectors, borderline ones, and at least one
    # may differ: sgemm rounds a dot product by where its rows fall in a
    # tile (one of 904 differs on an Intel AVX-512 host, none on AMD).
    differ = len(set(clf.support_) ^ set(ref.support_))
    assert differ <= max(1, 0.001 * len(ref.support_)), f"{differ} support vectors differ of {len(ref.support_)}"
    assert clf.intercept_ == pytest.approx(ref.intercept_, rel=1e-3)  # gammas 6e-9 apart, SMO to tol 1e-3
    np.testing.assert_array_equal(clf.predict(x), ref.predict(x))
    np.testing.assert_array_equal(clf.predict(X).compute(), ref.predict(x))
    # SMO stops at tol = 1e-3: two runs whose gammas differ in the 9th digit agree to about that
    np.testing.assert_allclose(clf.decision_function(X).compute(), ref.decision_function(x), atol=2e-3)
    # The objective against single-node accel svm-train on the same rows (class indices as labels).
    data = tmp_path / "d.txt"
    libsvm_file(data, x, np.searchsorted(clf.classes_, y))
    r = __import__("subprocess").run([ACCEL, "svm-train", "-c", "4", "-g", repr(clf._gamma), "--json", str(data),
                                      str(tmp_path / "m")], capture_output=True, text=True, check=True)
    single = __import__("json").loads(r.stdout)["problems"][0]["obj"]
    assert clf.summary_["problems"][0]["obj"] == pytest.approx(single, rel=1e-6)


def test_svc_labels_must_match_rows(client):
    X = da.ones((10, 2), chunks=5)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        adask.SVC(client=client, accel_bin=ACCEL).fit(X, da.ones(9, chunks=5))
