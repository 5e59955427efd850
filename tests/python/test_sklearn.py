"""accel.sklearn: scikit-learn's own estimator checks on every estimator,
results equal to the CLI's on the same data, pickling, Pipeline and
GridSearchCV, the GIL released during fit, Ctrl-C, logging, sparse input."""
import logging
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sklearn", reason="scikit-learn (Debian python3-sklearn) not installed")
accel = pytest.importorskip("accel._accel", reason="the accel Python module is not built (pybind11-dev missing)")

import scipy.sparse as sp  # noqa: E402
from sklearn.datasets import load_iris, make_blobs  # noqa: E402
from sklearn.model_selection import GridSearchCV  # noqa: E402
from sklearn.pipeline import Pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402
from sklearn.utils.estimator_checks import check_estimator  # noqa: E402

from accel.sklearn import SVC, SVR, KMeans, NuSVC, NuSVR, OneClassSVM  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
ACCEL = Path(os.environ.get("ACCEL_BIN", REPO / "build" / "bin" / "accel"))
ESTIMATORS = [KMeans, SVC, NuSVC, SVR, NuSVR, OneClassSVM]

# Checks expected to fail, and why. check_estimator skips the pandas
# checks where pandas is missing (a SkipTest, not a failure).
EXPECTED_FAILURES = {
    # nu-SVC has no C to weigh per class: LIBSVM, and scikit-learn's NuSVC
    # (which marks the same check as expected to fail), ignore class_weight.
    "NuSVC": {"check_class_weight_classifiers"},
}


@pytest.mark.parametrize("Estimator", ESTIMATORS, ids=lambda e: e.__name__)
def test_check_estimator(Estimator):
    failed, ran = {}, 0
    for est, check in check_estimator(Estimator(), generate_only=True):
        name = getattr(check, "func", check).__name__
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                check(est)
                ran += 1
            except Exception as e:  # noqa: BLE001 - every failure is reported below
                if type(e).__name__ != "SkipTest":
                    failed[name] = repr(e)[:400]
    expected = EXPECTED_FAILURES.get(Estimator.__name__, set())
    assert set(failed) == expected, failed
    assert ran >= 30


def test_kmeans_equals_the_cli(tmp_path):
    x, _ = make_blobs(3000, 12, centers=20, random_state=3)
    x = x.astype(np.float32)
    init = x[:20].copy()
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "init.npy", init)
    subprocess.run([str(ACCEL), "kmeans", "--input", str(tmp_path / "x.npy"), "--k", "20", "--init",
                    str(tmp_path / "init.npy"), "--max-iter", "15", "--tol", "0", "--algorithm", "lloyd", "--device",
                    "cpu", "--output-centroids", str(tmp_path / "c.npy"), "--output-labels",
                    str(tmp_path / "l.npy")], check=True, capture_output=True)
    km = KMeans(20, init=init, max_iter=15, tol=0, algorithm="lloyd", device="cpu").fit(x)
    np.testing.assert_array_equal(km.cluster_centers_, np.load(tmp_path / "c.npy"))
    np.testing.assert_array_equal(km.labels_, np.load(tmp_path / "l.npy"))
    assert km.n_iter_ == 15


def read_libsvm_model(path):
    head, svs = {}, []
    lines = Path(path).read_text().splitlines()
    at = lines.index("SV")
    for line in lines[:at]:
        key, *vals = line.split()
        head[key] = vals
    for line in lines[at + 1:]:
        svs.append([float(v) for v in line.split() if ":" not in v])
    return head, np.array(svs)


CLI_TYPES = [(SVC, ["-s", "0", "-c", "3"], {"C": 3}), (NuSVC, ["-s", "1", "-n", "0.3"], {"nu": 0.3}),
             (OneClassSVM, ["-s", "2", "-n", "0.2"], {"nu": 0.2}),
             (SVR, ["-s", "3", "-c", "3", "-p", "0.05"], {"C": 3, "epsilon": 0.05}),
             (NuSVR, ["-s", "4", "-c", "3", "-n", "0.4"], {"C": 3, "nu": 0.4})]


@pytest.mark.parametrize("Estimator,flags,params", CLI_TYPES, ids=lambda v: getattr(v, "__name__", ""))
def test_svm_equals_the_cli(tmp_path, Estimator, flags, params):
    x, y = load_iris(return_X_y=True)  # labels 0, 1, 2 in order: first appearance is ascending
    x = ((x - x.min(0)) / (x.max(0) - x.min(0))).astype(np.float32)
    with open(tmp_path / "iris.txt", "w") as f:
        for xi, yi in zip(x, y):
            f.write(f"{yi} " + " ".join(f"{j + 1}:{v:.9g}" for j, v in enumerate(xi) if v != 0) + "\n")
    gamma = 0.7
    subprocess.run([str(ACCEL), "svm-train", *flags, "-g", repr(gamma), str(tmp_path / "iris.txt"),
                    str(tmp_path / "model")], check=True, capture_output=True)
    subprocess.run([str(ACCEL), "svm-predict", str(tmp_path / "iris.txt"), str(tmp_path / "model"),
                    str(tmp_path / "pred")], check=True, capture_output=True)
    est = Estimator(gamma=gamma, device="cpu", **params)
    est.fit(x) if Estimator is OneClassSVM else est.fit(x, y)
    head, coef = read_libsvm_model(tmp_path / "model")
    cli_pred = np.loadtxt(tmp_path / "pred")
    if Estimator in (SVR, NuSVR):
        np.testing.assert_allclose(est.predict(x), cli_pred, rtol=1e-5)  # svm-predict prints %.17g of float64 sums
    else:
        np.testing.assert_array_equal(est.predict(x), cli_pred)
    rho = np.array([float(v) for v in head["rho"]])
    if Estimator in (SVC, NuSVC):
        np.testing.assert_array_equal(est.n_support_, [int(v) for v in head["nr_sv"]])
        np.testing.assert_allclose(est.intercept_, -rho, rtol=1e-12)
    else:
        assert est.support_.size == int(head["total_sv"][0])
        np.testing.assert_allclose(est.intercept_, -rho, rtol=1e-12)
    np.testing.assert_allclose(est.dual_coef_, coef.T, rtol=1e-12)


@pytest.mark.parametrize("Estimator", ESTIMATORS, ids=lambda e: e.__name__)
def test_pickle_round_trip(Estimator):
    x, y = load_iris(return_X_y=True)
    est = Estimator().fit(x, y) if Estimator is not KMeans else Estimator(3, random_state=0).fit(x)
    again = pickle.loads(pickle.dumps(est))
    methods = ["predict"] + [m for m in ("decision_function", "transform", "score_samples") if hasattr(est, m)]
    for m in methods:
        np.testing.assert_array_equal(getattr(again, m)(x), getattr(est, m)(x), err_msg=m)


def test_linear_coef_and_n_iter_follow_scikit_learn():
    from sklearn import svm
    x, y = load_iris(return_X_y=True)
    y4 = np.where(x[:, 0] > 6.5, 3, y)  # four classes: the pairs' weights are not dual_coef_ @ support_vectors_
    for labels in (y4, (y == 1).astype(int)):
        ours = SVC(kernel="linear", C=2, decision_function_shape="ovo").fit(x, labels)
        theirs = svm.SVC(kernel="linear", C=2).fit(x, labels)
        assert ours.coef_.shape == theirs.coef_.shape
        np.testing.assert_allclose(ours.coef_, theirs.coef_, rtol=2e-3, atol=2e-3)
        primal = x @ ours.coef_.T + ours.intercept_  # the ovo decisions, pair by pair
        np.testing.assert_allclose(ours.decision_function(x).reshape(primal.shape), primal, atol=1e-4)
        assert ours.n_iter_.shape == theirs.n_iter_.shape and (ours.n_iter_ > 0).all()


def test_svc_probability_survives_pickling():
    x, y = load_iris(return_X_y=True)
    est = SVC(probability=True).fit(x, y)
    again = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(again.predict_proba(x), est.predict_proba(x))
    assert not hasattr(SVC(), "predict_proba")


def test_pipeline_and_grid_search():
    x, y = load_iris(return_X_y=True)
    search = GridSearchCV(Pipeline([("scale", StandardScaler()), ("svc", SVC())]),
                          {"svc__C": [0.1, 10], "svc__kernel": ["rbf", "linear"]}, cv=3).fit(x, y)
    assert search.best_score_ > 0.9
    assert search.best_params_["svc__C"] == 10
    km = Pipeline([("scale", StandardScaler()), ("km", KMeans(3, random_state=0))]).fit(x)
    assert km.transform(x).shape == (150, 3)
    grid = GridSearchCV(KMeans(random_state=0), {"n_clusters": [2, 3, 4]}, cv=3).fit(x)
    assert grid.best_params_["n_clusters"] == 4  # score is -inertia: more clusters, less inertia


def test_sparse_and_dense_input_agree():
    x, y = load_iris(return_X_y=True)
    x = np.where(x > 2, x, 0)  # a third of the values zero
    for Estimator in (SVC, NuSVC, SVR, NuSVR, OneClassSVM):
        dense = Estimator().fit(x, y)
        sparse = Estimator().fit(sp.csr_matrix(x), y)
        assert sp.issparse(sparse.support_vectors_) and not sp.issparse(dense.support_vectors_)
        np.testing.assert_array_equal(sparse.support_, dense.support_)
        np.testing.assert_array_equal(sparse.predict(sp.csr_matrix(x)), dense.predict(x))


def test_fit_releases_the_gil():
    x, y = make_blobs(6000, 50, centers=4, random_state=0)
    count, done = [0], threading.Event()

    def fit():
        SVC(C=100, gamma=0.5).fit(x, y % 2)
        done.set()

    t = threading.Thread(target=fit)
    t.start()
    start = time.monotonic()
    while not done.is_set():
        count[0] += 1
    t.join()
    took = time.monotonic() - start
    # With the GIL held through the fit, this thread would get a turn every
    # 5 ms switch interval at best: a few hundred increments a second.
    assert count[0] > 10000 * max(took, 0.05), (count[0], took)


def test_verbose_logs_progress(caplog):
    x, y = load_iris(return_X_y=True)
    with caplog.at_level(logging.INFO, logger="accel.sklearn"):
        KMeans(3, verbose=1, random_state=0).fit(x)
        SVC(verbose=True).fit(x, y)
    messages = [r.getMessage() for r in caplog.records if r.name == "accel.sklearn"]
    assert any(m.startswith("iteration 1:") for m in messages), messages
    assert sum(m.startswith("problem ") for m in messages) == 3, messages  # three class pairs


CTRL_C = textwrap.dedent("""
    import os, sys, threading, time
    import numpy as np
    from accel.sklearn import KMeans, SVC
    rng = np.random.default_rng(0)
    which = sys.argv[1]
    def threads():
        return int(next(l for l in open("/proc/self/status") if l.startswith("Threads:")).split()[1])
    if which == "kmeans":
        x = rng.standard_normal((400000, 32), dtype=np.float32)
        KMeans(64, max_iter=1, random_state=0).fit(x[:5000])  # the thread pools exist before
        fit = lambda: KMeans(256, max_iter=100000, tol=0, random_state=0).fit(x)
    else:
        x = rng.standard_normal((20000, 64))
        y = (rng.random(20000) < 0.5).astype(int)  # noise: a long fit
        SVC().fit(x[:200], y[:200])
        fit = lambda: SVC(C=1000, gamma=0.05, tol=1e-6).fit(x, y)
    before = (threading.active_count(), threads())
    print("fitting", flush=True)
    try:
        fit()
        print("finished", flush=True)
    except KeyboardInterrupt:
        after = (threading.active_count(), threads())
        print("interrupted", time.monotonic(), "%d,%d" % before, "%d,%d" % after, flush=True)
""")


@pytest.mark.parametrize("which", ["kmeans", "svc"])
def test_ctrl_c_interrupts_a_fit(which):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    p = subprocess.Popen([sys.executable, "-c", CTRL_C, which], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env)
    try:
        assert p.stdout.readline().strip() == "fitting"
        time.sleep(1.5)
        sent = time.monotonic()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    finally:
        p.kill()
    assert out.startswith("interrupted"), (out, err)
    _, at, before, after = out.split()
    assert float(at) - sent < 1.0, f"KeyboardInterrupt {float(at) - sent:.2f} s after Ctrl-C"
    assert before == after, f"Python threads, OS threads before the fit: {before}, after the interrupt: {after}"


def test_bad_input_follows_scikit_learn():
    from sklearn.exceptions import NotFittedError
    x, y = load_iris(return_X_y=True)
    with pytest.raises(NotFittedError):
        SVC().predict(x)
    bad = x.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        KMeans(3).fit(bad)
    for rows in (bad, sp.csr_matrix(bad)):  # the SVMs scan for NaN/Inf in accel, in the same words
        with pytest.raises(ValueError, match="Input X contains NaN"):
            SVC().fit(rows, y)
    huge = x.copy()
    huge[0, 0] = 1e300  # beyond float32
    with pytest.raises(ValueError, match="infinity or a value too large"):
        SVR().fit(huge, y)
    with pytest.raises(ValueError, match="Input X contains NaN"):
        SVC().fit(x, y).predict(bad)
    with pytest.raises(ValueError, match="n_samples=2 should be >= n_clusters=3"):
        KMeans(3).fit(x[:2])
    with pytest.raises(ValueError, match="4 features"):
        SVC().fit(x, y).predict(x[:, :3])
    with pytest.raises(ValueError, match="'C' parameter"):
        SVC(C=-1).fit(x, y)
    with pytest.raises(ValueError, match="kernel"):
        SVC(kernel="precomputed").fit(x, y)
    with pytest.raises(ValueError, match="more than one|greater than one"):
        SVC().fit(x[:10], y[:10])
