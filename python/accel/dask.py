"""accel on a dask.distributed cluster.

``accel.dask.KMeans`` fits on a dask array or dataframe across the workers
of a ``dask.distributed`` cluster. Each Dask worker writes the chunks it
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
from .sklearn import _check_choice, _check_int, _check_real


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

    def _check_params(self):
        _check_int("n_clusters", self.n_clusters, 1)
        _check_int("max_iter", self.max_iter, 1)
        _check_int("timeout_ms", self.timeout_ms, 1)
        _check_real("tol", self.tol, 0)
        _check_choice("algorithm", self.algorithm, _LocalKMeans._ALGORITHMS)

    def fit(self, X, y=None):
        self._check_params()
        X = _as_rows(X)
        n = X.shape[0]
        if n < self.n_clusters:
            raise ValueError(f"n_samples={n} should be >= n_clusters={self.n_clusters}.")
        accel_bin = _accel_bin(self.accel_bin)
        client = self.client or default_client()
        workers = sorted(client.scheduler_info()["workers"])
        if not workers:
            raise RuntimeError("the dask cluster has no workers")
        # The seed and the stopping distance as single-node accel.sklearn
        # derives them, so the centroids are its.
        seed = int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))
        own = self.scratch is None
        scratch = tempfile.mkdtemp(prefix="accel-dask-") if own else self.scratch
        try:
            self._fit_in(client, workers, X, scratch, accel_bin, seed)
        finally:
            if own:
                shutil.rmtree(scratch, ignore_errors=True)
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
        rendezvous = os.path.join(scratch, f"rendezvous-{job}")
        centroids = os.path.join(scratch, f"centroids-{job}.npy")
        labels = os.path.join(scratch, f"labels-{job}.npy")
        host = self.host or get_ip(client.scheduler.address.split("://")[-1].rsplit(":", 1)[0])
        coordinator = subprocess.Popen(
            [accel_bin, "coordinator", "--input", rows, "--k", str(self.n_clusters),
             "--workers", str(len(workers)), "--pull", "--init", "kmeans-parallel", "--seed", str(seed),
             "--max-iter", str(self.max_iter), "--tol", repr(tol), "--algorithm",
             _LocalKMeans._ALGORITHMS[self.algorithm], "--device", self.device, "--timeout-ms", str(self.timeout_ms),
             "--listen", f"{host}:0", "--rendezvous", rendezvous, "--output-centroids", centroids,
             "--output-labels", labels, "--json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        members = []
        try:
            address, token = self._await_rendezvous(coordinator, rendezvous)
            for i, w in enumerate(workers, start=1):
                args = ["--coordinator", address, "--id", str(i), "--job", str(token), "--device", self.device,
                        "--timeout-ms", str(self.timeout_ms)]
                # Where its worker is lost before the member ends, Dask runs it
                # again elsewhere: the member restarts, as a killed one may.
                members.append(client.submit(_run_member, accel_bin, args, workers=[w], allow_other_workers=True,
                                             pure=False, key=f"accel-member-{job}-{i}"))
            out, err = coordinator.communicate()
        finally:
            if coordinator.poll() is None:
                coordinator.kill()
                coordinator.wait()
            client.cancel(members)
        if coordinator.returncode != 0:
            raise RuntimeError(f"accel coordinator exited {coordinator.returncode}: {err.strip()[-1500:]}")
        summary = json.loads(out.strip().splitlines()[-1])
        self.cluster_centers_ = np.load(centroids)
        self.labels_ = np.load(labels)
        self.inertia_ = float(summary["inertia"])
        self.n_iter_ = int(summary["iterations"])
        self.summary_ = summary

    @staticmethod
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
