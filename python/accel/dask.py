"""accel on a dask.distributed cluster.

``accel.dask.KMeans`` and ``accel.dask.SVC`` fit on a dask array or
dataframe across the workers of a ``dask.distributed`` cluster (k-means
below; the SVC likewise, from LIBSVM text part files). Each Dask worker writes the chunks it
holds into their rows of one ``.npy`` file in a scratch folder every worker
and the client share (the local disk of a ``LocalCluster``, a shared file
system otherwise), and runs an ``accel worker`` beside itself; the ``accel
coordinator`` runs on the client's host. The rows never pass through the
client: each accel member reads its own rows from the file (``--pull``;
the coordinator only those of its share), and a Dask worker lost mid-fit
is a member lost, whose rows the survivors read (the engine's ``--on-loss
move``). The centroids are those
of single-node ``accel.sklearn.KMeans`` with ``init='k-means||'`` and the
same ``random_state``.

The ``accel`` executable comes from ``accel_bin``, else ``ACCEL_BIN``, else
``PATH``, on the client and on every worker.
"""
import contextlib
import copy
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin, TransformerMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

try:
    import dask
    import dask.array as da
    from distributed import default_client, secede
    from distributed.utils import get_ip
except ImportError as e:  # pragma: no cover - said once, with the fix
    raise ImportError("accel.dask needs dask and distributed: apt-get install python3-dask python3-distributed, "
                      "or pip install 'dask[distributed]'") from e

from . import _accel
from .sklearn import KMeans as _LocalKMeans
from .sklearn import SVC as _LocalSVC
from .sklearn import _check_choice, _check_int


def _accel_bin(given):
    path = given or os.environ.get("ACCEL_BIN") or shutil.which("accel")
    if not path or not os.access(path, os.X_OK):
        raise RuntimeError("accel.dask needs the accel executable: pass accel_bin=, set ACCEL_BIN, or put accel on PATH "
                           "(cmake --install installs it)")
    return path


def _as_rows(X):
    """X as a 2-D float32 dask array with known row chunks and one column
    chunk, checked as scikit-learn checks an array, before any worker runs."""
    if hasattr(X, "to_dask_array"):  # a dask dataframe or series
        X = X.to_dask_array(lengths=True)
    elif not isinstance(X, da.Array):
        X = da.from_array(np.asarray(X), chunks="auto")
    if X.ndim != 2:
        raise ValueError(f"Expected 2D array, got {X.ndim}D array instead")
    if not np.issubdtype(X.dtype, np.number) or np.issubdtype(X.dtype, np.complexfloating):
        raise ValueError(f"dtype='numeric' is not compatible with arrays of dtype {X.dtype}: accel.dask takes "
                         "real numbers")
    if any(np.isnan(c) for c in X.chunks[0]):
        raise ValueError("The dask array has unknown (ragged) chunk sizes: call X.compute_chunk_sizes() first")
    if X.shape[1] < 1:
        raise ValueError(f"Found array with 0 feature(s) (shape={X.shape}) while a minimum of 1 is required.")
    if X.numblocks[1] != 1:
        X = X.rechunk({1: X.shape[1]})
    return X.astype(np.float32)


def _write_rows(chunk, path, offset, begin):
    """Runs on the worker that holds the chunk: its rows go into their place
    in the job's one .npy file from there (rows [begin, begin + len)), and
    it returns their count, mean and sum of squared deviations (for the
    stopping distance: Chan et al.'s pairwise update combines them)."""
    part = np.ascontiguousarray(chunk, dtype=np.float32)
    with open(path, "r+b") as f:
        f.seek(offset + begin * part.shape[1] * 4)
        f.write(memoryview(part).cast("B"))
    wide = part.astype(np.float64)
    mean = wide.mean(axis=0) if len(part) else np.zeros(part.shape[1])
    return len(part), mean, ((wide - mean) ** 2).sum(axis=0)


def _variance(stats):
    """Per-column variance of the rows from their chunks' (n, mean, M2)."""
    n, mean, m2 = 0, None, None
    for k, mu, s in stats:
        if k == 0:
            continue
        if n == 0:
            n, mean, m2 = k, mu, s
            continue
        delta = mu - mean
        total = n + k
        mean = mean + delta * (k / total)
        m2 = m2 + s + delta ** 2 * (n * k / total)
        n = total
    return m2 / n


def _allocate(path, shape):
    """The job's .npy file, its header written and its rows' space sized
    (sparse): the workers write the rows in. Returns the rows' offset."""
    from numpy.lib import format as npy
    header = {"descr": npy.dtype_to_descr(np.dtype(np.float32)), "fortran_order": False, "shape": tuple(shape)}
    with open(path, "wb") as f:
        npy.write_array_header_1_0(f, header)
        offset = f.tell()
        f.truncate(offset + shape[0] * shape[1] * 4)
    return offset


def _die_with_parent():
    # The accel worker is a member of the Dask worker's: it goes when that
    # process does (a killed Dask worker is a lost member, not a stray one).
    import ctypes
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _run_member(accel_bin, args):
    # Out of the worker's thread pool: a member runs as long as the fit,
    # and one Dask runs again after its worker was lost must find a thread.
    secede()
    r = subprocess.run([accel_bin, "worker", *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                       preexec_fn=_die_with_parent)
    return r.returncode, r.stderr[-2000:]


def _await_rendezvous(coordinator, path, timeout_s=60):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if coordinator.poll() is not None:
            raise RuntimeError(f"accel coordinator exited {coordinator.returncode}: "
                               f"{coordinator.stderr.read().strip()[-1500:]}")
        try:
            with open(path) as f:
                address, token = f.read().split()
            return address, int(token, 16)
        except (FileNotFoundError, ValueError):
            time.sleep(0.02)
    raise RuntimeError(f"accel coordinator wrote no rendezvous to {path} in {timeout_s} s")


def _cluster(est):
    """The estimator's client, its workers (one member each) and the accel executable."""
    accel_bin = _accel_bin(est.accel_bin)
    client = est.client or default_client()
    workers = sorted(client.scheduler_info()["workers"])
    if not workers:
        raise RuntimeError("the dask cluster has no workers")
    return client, workers, accel_bin


@contextlib.contextmanager
def _scratch(est):
    """The job's scratch folder: the given one, or a new one removed after."""
    if est.scratch is not None:
        yield est.scratch
        return
    scratch = tempfile.mkdtemp(prefix="accel-dask-")
    try:
        yield scratch
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _run_job(est, client, workers, scratch, accel_bin, job, command, args):
    """An accel job: `accel COMMAND ... ARGS` as its coordinator on this host,
    one member per Dask worker beside it; returns the coordinator's JSON
    summary."""
    rendezvous = os.path.join(scratch, f"rendezvous-{job}")
    host = est.host or get_ip(client.scheduler.address.split("://")[-1].rsplit(":", 1)[0])
    coordinator = subprocess.Popen(
        [accel_bin, *command, "--workers", str(len(workers)), "--timeout-ms", str(est.timeout_ms), "--listen",
         f"{host}:0", "--rendezvous", rendezvous, "--device", est.device, "--json", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    members = []
    try:
        address, token = _await_rendezvous(coordinator, rendezvous)
        for i, w in enumerate(workers, start=1):
            member = ["--coordinator", address, "--id", str(i), "--job", str(token), "--device", est.device,
                      "--timeout-ms", str(est.timeout_ms)]
            # Where its worker is lost before the member ends, Dask runs it
            # again elsewhere: the member restarts, as a killed one may.
            members.append(client.submit(_run_member, accel_bin, member, workers=[w], allow_other_workers=True,
                                         pure=False, key=f"accel-member-{job}-{i}"))
        out, err = coordinator.communicate()
    finally:
        if coordinator.poll() is None:
            coordinator.kill()
            coordinator.wait()
        client.cancel(members)
    if coordinator.returncode != 0:
        raise RuntimeError(f"accel coordinator exited {coordinator.returncode}: {err.strip()[-1500:]}")
    return json.loads(out.strip().splitlines()[-1])


class KMeans(TransformerMixin, ClusterMixin, BaseEstimator):
    """K-means on a dask collection, computed by accel members inside the
    Dask workers (module docstring).

    Parameters as ``accel.sklearn.KMeans`` with ``init='k-means||'`` (k-means++
    and random would have the coordinator read every row), one start
    (``n_init=1``: each start is a distributed job), and:
    - client: the ``distributed.Client`` (default: the current one);
    - scratch: a folder the client and every worker share (default: a new
      one under the temporary folder, removed after the fit);
    - timeout_ms: the barrier's wait before a silent member is evicted;
    - host: the address the workers reach the client's host at (default:
      the one that routes to the scheduler);
    - accel_bin: the accel executable (module docstring).
    Fitted: cluster_centers_, labels_ (numpy), inertia_, n_iter_.
    """

    def __init__(self, n_clusters=8, *, max_iter=300, tol=1e-4, random_state=None, algorithm="lloyd", device="all",
                 client=None, scratch=None, timeout_ms=2000, host=None, accel_bin=None):
        self.n_clusters = n_clusters
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state
        self.algorithm = algorithm
        self.device = device
        self.client = client
        self.scratch = scratch
        self.timeout_ms = timeout_ms
        self.host = host
        self.accel_bin = accel_bin

    _ALGORITHMS = _LocalKMeans._ALGORITHMS
    _check_common = _LocalKMeans._check_common

    def _check_params(self):
        self._check_common()
        _check_int("timeout_ms", self.timeout_ms, 1)

    def fit(self, X, y=None):
        self._check_params()
        X = _as_rows(X)
        n = X.shape[0]
        if n < self.n_clusters:
            raise ValueError(f"n_samples={n} should be >= n_clusters={self.n_clusters}.")
        client, workers, accel_bin = _cluster(self)
        # The seed and the stopping distance as single-node accel.sklearn
        # derives them, so the centroids are its.
        seed = int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))
        with _scratch(self) as scratch:
            self._fit_in(client, workers, X, scratch, accel_bin, seed)
        self.n_features_in_ = X.shape[1]
        return self

    def _fit_in(self, client, workers, X, scratch, accel_bin, seed):
        job = uuid.uuid4().hex[:12]
        rows = os.path.join(scratch, f"rows-{job}.npy")
        offset = _allocate(rows, X.shape)
        begins = np.concatenate([[0], np.cumsum(X.chunks[0])[:-1]]).astype(int)
        writes = [dask.delayed(_write_rows)(c, rows, offset, int(b)) for c, b in zip(X.to_delayed().ravel(), begins)]
        stats = client.gather(client.compute(writes))
        tol = float(np.sqrt(np.mean(_variance(stats)) * self.tol)) if self.tol > 0 else 0.0
        centroids = os.path.join(scratch, f"centroids-{job}.npy")
        labels = os.path.join(scratch, f"labels-{job}.npy")
        summary = _run_job(self, client, workers, scratch, accel_bin, job, ["coordinator"], [
            "--input", rows, "--k", str(self.n_clusters), "--pull", "--init", "kmeans-parallel", "--seed", str(seed),
            "--max-iter", str(self.max_iter), "--tol", repr(tol), "--algorithm",
            _LocalKMeans._ALGORITHMS[self.algorithm], "--output-centroids", centroids, "--output-labels", labels])
        self.cluster_centers_ = np.load(centroids)
        self.labels_ = np.load(labels)
        self.inertia_ = float(summary["inertia"])
        self.n_iter_ = int(summary["iterations"])
        self.summary_ = summary

    def predict(self, X):
        """Labels of X's rows, a dask array computed where X's chunks are."""
        check_is_fitted(self)
        X = _as_rows(X)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, but KMeans is expecting {self.n_features_in_} features "
                             "as input.")
        centers = np.ascontiguousarray(self.cluster_centers_, dtype=np.float32)
        device = "auto" if self.device == "all" else self.device
        return X.map_blocks(lambda b: _accel.kmeans_assign(np.ascontiguousarray(b), centers, device)[0],
                            drop_axis=1, dtype=np.int32)

    def fit_predict(self, X, y=None):
        return self.fit(X).labels_

    def transform(self, X):
        check_is_fitted(self)
        X = _as_rows(X)
        c = self.cluster_centers_.astype(np.float32)
        return X.map_blocks(lambda b: np.sqrt(np.maximum(
            (b * b).sum(1)[:, None] - 2 * b @ c.T + (c * c).sum(1)[None, :], 0)), chunks=(X.chunks[0], (len(c),)),
            dtype=np.float32)


# ---- SVMs ----

def _as_labels(y, X):
    """y as a 1-D dask array whose chunks are X's rows'."""
    if hasattr(y, "to_dask_array"):
        y = y.to_dask_array(lengths=True)
    elif not isinstance(y, da.Array):
        y = da.from_array(np.asarray(y), chunks=(X.chunks[0],))
    if y.ndim != 1:
        raise ValueError(f"y should be a 1d array, got an array of shape {y.shape} instead.")
    if y.shape[0] != X.shape[0]:
        raise ValueError(f"Found input variables with inconsistent numbers of samples: [{X.shape[0]}, {y.shape[0]}]")
    if any(np.isnan(c) for c in y.chunks[0]):
        raise ValueError("y has unknown (ragged) chunk sizes: call y.compute_chunk_sizes() first")
    return y.rechunk((X.chunks[0],))


def _write_libsvm(chunk, labels, classes, path):
    """Runs on the worker that holds the chunk: its rows as LIBSVM text (the
    label is the class's index, as accel.sklearn trains; values with 9
    digits, a float32's round trip), and the count, sum and sum of squares
    of its values (gamma='scale')."""
    part = np.ascontiguousarray(chunk, dtype=np.float32)
    index = np.searchsorted(classes, labels)
    lines = []
    for row, c in zip(part, index):
        nz = np.flatnonzero(row)
        lines.append(" ".join([str(int(c))] + [f"{j + 1}:{row[j]:.9g}" for j in nz]))
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + ("\n" if lines else ""))
    os.replace(tmp, path)
    wide = part.astype(np.float64)
    return part.size, float(wide.sum()), float((wide * wide).sum())


def _read_model(path):
    """A LIBSVM model file: its header, and its support vectors' CSR and
    coefficients."""
    head, coef, indptr, indices, data = {}, [], [0], [], []
    with open(path) as f:
        for line in f:
            if line.strip() == "SV":
                break
            key, *vals = line.split()
            head[key] = vals
        k = int(head["nr_class"][0])
        for line in f:
            fields = line.split()
            coef.append([float(v) for v in fields[:k - 1]])
            for pair in fields[k - 1:]:
                j, v = pair.split(":")
                indices.append(int(j) - 1)
                data.append(float(v))
            indptr.append(len(indices))
    return head, np.array(coef).reshape(-1, k - 1).T, (np.array(indptr, np.int64), np.array(indices, np.int32),
                                                        np.array(data, np.float32))


def _apply(block, est, method):
    return getattr(_LocalSVC, method)(est, block)


class SVC(_LocalSVC):
    """C-support vector classification on a dask collection, trained by
    accel members inside the Dask workers (module docstring: each worker
    writes its chunks as a LIBSVM part file, and the members read their rows
    from the parts). Parameters as ``accel.sklearn.SVC``, plus the
    cluster's (``accel.dask.KMeans``). The model is single-node
    ``accel.sklearn.SVC``'s (objective within 1e-6 relative); it predicts
    numpy inputs as that does, and dask inputs chunk by chunk where they
    are."""

    def __init__(self, *, C=1.0, kernel="rbf", degree=3, gamma="scale", coef0=0.0, shrinking=True, probability=False,
                 tol=1e-3, cache_size=200, class_weight=None, verbose=False, decision_function_shape="ovr",
                 device="cpu", client=None, scratch=None, timeout_ms=2000, host=None, accel_bin=None):
        super().__init__(C=C, kernel=kernel, degree=degree, gamma=gamma, coef0=coef0, shrinking=shrinking,
                         probability=probability, tol=tol, cache_size=cache_size, class_weight=class_weight,
                         verbose=verbose, decision_function_shape=decision_function_shape, device=device)
        self.client = client
        self.scratch = scratch
        self.timeout_ms = timeout_ms
        self.host = host
        self.accel_bin = accel_bin

    def fit(self, X, y):
        X = _as_rows(X)
        y = _as_labels(y, X)
        _check_int("timeout_ms", self.timeout_ms, 1)
        self._check_params()
        _check_choice("decision_function_shape", self.decision_function_shape, {"ovo", "ovr"})
        if self.class_weight is not None or self.probability:
            raise ValueError("accel.dask.SVC: class_weight and probability are not supported yet")
        self.classes_ = np.unique(y.compute())
        if len(self.classes_) < 2:
            raise ValueError(f"The number of classes has to be greater than one; got {len(self.classes_)} class")
        client, workers, accel_bin = _cluster(self)
        with _scratch(self) as scratch:
            self._train_in(client, workers, X, y, scratch, accel_bin)
        self.n_features_in_ = X.shape[1]
        return self

    def _train_in(self, client, workers, X, y, scratch, accel_bin):
        job = uuid.uuid4().hex[:12]
        parts = os.path.join(scratch, f"parts-{job}")
        os.makedirs(parts)
        writes = [dask.delayed(_write_libsvm)(c, l, self.classes_, os.path.join(parts, f"{i:06d}.txt"))
                  for i, (c, l) in enumerate(zip(X.to_delayed().ravel(), y.to_delayed().ravel()))]
        stats = client.gather(client.compute(writes))
        n, total, squares = (sum(v) for v in zip(*stats))
        self._sparse = False
        self._accel_params = self._params_with(self._gamma_of(X.shape[1], lambda: squares / n - (total / n) ** 2))
        gamma = self._gamma
        kernels = {"linear": 0, "poly": 1, "rbf": 2, "sigmoid": 3}
        model = os.path.join(scratch, f"model-{job}")
        cli = ["-s", "0", "-t", str(kernels[self.kernel]), "-d", str(int(self.degree)), "-g", repr(gamma),
               "-r", repr(float(self.coef0)), "-c", repr(float(self.C)), "-e", repr(float(self.tol)),
               "-m", repr(float(self.cache_size)), "-h", "1" if self.shrinking else "0"]
        summary = _run_job(self, client, workers, scratch, accel_bin, job, ["coordinator", "svm-train"],
                           [*cli, "--pull", os.path.join(parts, "*.txt"), model])
        head, coef, (indptr, indices, data) = _read_model(model)
        sv = _accel.csr(indptr, indices, data, int(X.shape[1]))
        self._model = _accel.svm_model(self._accel_params, sv, [int(v) for v in head["label"]],
                                       [float(v) for v in head["rho"]], [int(v) for v in head["nr_sv"]],
                                       [list(r) for r in coef], [], [])
        self._set_attributes(self._model, X.shape)
        self.support_ = np.asarray(summary["sv_rows"], dtype=np.int32)
        self.n_iter_ = np.asarray([p["iterations"] for p in summary["problems"]], dtype=np.int32)
        self.class_weight_ = np.ones(len(self.classes_))
        self.summary_ = summary
        if len(self.classes_) == 2:  # scikit-learn's sign: positive for classes_[1]
            self.dual_coef_, self.intercept_ = -self._dual_coef, -self._intercept

    def _chunked(self, X, method, shape):
        if not isinstance(X, (da.Array,)) and not hasattr(X, "to_dask_array"):
            return getattr(super(), method)(X)
        X = _as_rows(X)
        est = copy.copy(self)  # what travels to the workers: the model, not the client
        est.client = None
        if shape == 1:
            return X.map_blocks(_apply, est, method, drop_axis=1,
                                dtype=self.classes_.dtype if method == "predict" else np.float64)
        return X.map_blocks(_apply, est, method, chunks=(X.chunks[0], (shape,)), dtype=np.float64)

    def predict(self, X):
        return self._chunked(X, "predict", 1)

    def decision_function(self, X):
        k = len(self.classes_)
        if k == 2:
            return self._chunked(X, "decision_function", 1)
        return self._chunked(X, "decision_function", k if self.decision_function_shape == "ovr" else k * (k - 1) // 2)
