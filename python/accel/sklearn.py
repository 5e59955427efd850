"""scikit-learn estimators computed by accel: KMeans, SVC, NuSVC, OneClassSVM,
SVR and NuSVR, with scikit-learn's parameters, attributes and conventions.

    from accel.sklearn import KMeans, SVC
    km = KMeans(n_clusters=256, random_state=0).fit(X)      # X: float32 C order is used in place
    clf = SVC(C=10, gamma="scale").fit(X_train, y_train)    # dense or scipy.sparse CSR

Inputs are checked with scikit-learn's own validation (its wording for NaN,
wrong shapes and unfitted estimators). What reaches accel:

- KMeans: rows as float32 in C order. A float32 C-contiguous array is used
  in place (no copy); anything else is converted once (float64 -> float32).
- SVMs: rows in accel's CSR layout (int64 row pointers, int32 columns,
  float32 values), made once: a scipy CSR matrix's arrays are copied into
  it (other sparse formats are converted to CSR first), a dense array's
  non-zeros are gathered into it. Nothing is densified.

The GIL is released while accel computes; Ctrl-C stops a fit at its next
k-means iteration, seeding step or SMO round with KeyboardInterrupt. With
`verbose`, progress is logged at INFO level to the "accel.sklearn" logger.
Nothing falls back to scikit-learn: what accel cannot do raises.
"""
import logging
import numbers

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, ClusterMixin, OutlierMixin, RegressorMixin, TransformerMixin
from sklearn.metrics.pairwise import euclidean_distances
from sklearn.utils import check_random_state, compute_class_weight
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import _ovr_decision_function, check_classification_targets
from sklearn.utils.validation import check_is_fitted

from . import _accel

__all__ = ["KMeans", "SVC", "NuSVC", "OneClassSVM", "SVR", "NuSVR"]

log = logging.getLogger("accel.sklearn")

try:  # scikit-learn >= 1.6
    from sklearn.utils.validation import validate_data as _sk_validate
except ImportError:  # pragma: no cover - older scikit-learn
    _sk_validate = None


def _unchecked_finite():
    """validate_data's keyword that skips its NaN/Inf scan (the SVMs' CSR
    conversion in accel scans for them in the same pass, with the same words)."""
    import inspect
    from sklearn.utils.validation import check_array
    name = "ensure_all_finite" if "ensure_all_finite" in inspect.signature(check_array).parameters else "force_all_finite"
    return {name: False}


def _validate(est, X, y="no_validation", reset=True, **check):
    if _sk_validate is not None:
        return _sk_validate(est, X, y, reset=reset, **check)
    return est._validate_data(X, y, reset=reset, **check)


def _progress(est):
    return log.info if est.verbose else None


def _check_int(name, value, low):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < low:
        raise ValueError(f"The '{name}' parameter must be an int in the range [{low}, inf). Got {value!r} instead.")


def _check_real(name, value, low, closed_low=True, high=None):
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and np.isfinite(value)
    ok = ok and (value >= low if closed_low else value > low) and (high is None or value <= high)
    if not ok:
        bracket = "[" if closed_low else "("
        upper = "inf)" if high is None else f"{high}]"
        raise ValueError(f"The '{name}' parameter must be a float in the range {bracket}{low}, {upper}. "
                         f"Got {value!r} instead.")


def _check_choice(name, value, choices):
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"The '{name}' parameter must be a str among {sorted(choices)}. Got {value!r} instead.")


class KMeans(TransformerMixin, ClusterMixin, BaseEstimator):
    """K-means clustering by accel (Lloyd's iterations; 'elkan' keeps
    accel's Yinyang bounds, which skip rows whose label cannot change).

    Parameters as scikit-learn's KMeans, except:
    - init also takes 'k-means||' (scalable k-means++, Bahmani et al. 2012);
    - tol: iterations stop when no center moves sqrt(tol * mean variance of
      X) or more (scikit-learn sums the squared moves of all centers);
    - no sample_weight and no copy_x (X is never modified);
    - device: accel's device spec ('auto', 'cpu', 'opencl', 'fpga-emu', ...).
    """

    _INITS = {"k-means++": "kmeans++", "random": "random", "k-means||": "kmeans-parallel"}
    _ALGORITHMS = {"lloyd": "lloyd", "elkan": "yinyang", "auto": "auto"}

    def __init__(self, n_clusters=8, *, init="k-means++", n_init="auto", max_iter=300, tol=1e-4, verbose=0,
                 random_state=None, algorithm="lloyd", device="auto"):
        self.n_clusters = n_clusters
        self.init = init
        self.n_init = n_init
        self.max_iter = max_iter
        self.tol = tol
        self.verbose = verbose
        self.random_state = random_state
        self.algorithm = algorithm
        self.device = device

    def _check_params(self):
        self._check_common()
        if self.n_init != "auto":
            _check_int("n_init", self.n_init, 1)
        if isinstance(self.init, str):
            _check_choice("init", self.init, self._INITS)

    def _check_common(self):
        """The ranges accel.dask.KMeans shares."""
        _check_int("n_clusters", self.n_clusters, 1)
        _check_int("max_iter", self.max_iter, 1)
        _check_real("tol", self.tol, 0)
        _check_choice("algorithm", self.algorithm, self._ALGORITHMS)

    def _rows(self, X, reset):
        X = _validate(self, X, reset=reset, accept_sparse=False, dtype=[np.float64, np.float32], order="C")
        return X, np.ascontiguousarray(X, dtype=np.float32)

    def _initial_centers(self, X, rs):
        init = self.init
        if callable(init):
            init = init(X, self.n_clusters, random_state=rs)
        c = np.ascontiguousarray(np.asarray(init), dtype=np.float32)
        if c.shape != (self.n_clusters, X.shape[1]):
            raise ValueError(f"The shape of the initial centers {c.shape} does not match the number of clusters "
                             f"{self.n_clusters} and features {X.shape[1]}.")
        return c

    def fit(self, X, y=None):
        self._check_params()
        X, rows = self._rows(X, reset=True)
        n = rows.shape[0]
        if n < self.n_clusters:
            raise ValueError(f"n_samples={n} should be >= n_clusters={self.n_clusters}.")
        rs = check_random_state(self.random_state)
        given = not isinstance(self.init, str)
        if given and not callable(self.init):
            n_init = 1  # explicit centers: one start, as scikit-learn
        elif self.n_init == "auto":
            n_init = 1 if self.init == "k-means++" else 10  # scikit-learn's 'auto'
        else:
            n_init = self.n_init
        tol = float(np.sqrt(np.mean(np.var(X, axis=0)) * self.tol)) if self.tol > 0 else 0.0
        best = None
        for _ in range(n_init):
            centers = self._initial_centers(X, rs) if given else None
            r = _accel.kmeans_fit(rows, int(self.n_clusters), self._INITS.get(self.init, "kmeans++") if not given else "",
                                  centers, int(self.max_iter), tol, int(rs.randint(np.iinfo(np.int32).max)),
                                  self._ALGORITHMS[self.algorithm], self.device, _progress(self))
            if best is None or r["inertia"] < best["inertia"]:
                best = r
        self.cluster_centers_ = best["centers"].astype(X.dtype, copy=False)
        self.labels_ = best["labels"]
        self.inertia_ = float(best["inertia"])
        self.n_iter_ = int(best["n_iter"])
        return self

    def _assign(self, X):
        check_is_fitted(self)
        X, rows = self._rows(X, reset=False)
        centers = np.ascontiguousarray(self.cluster_centers_, dtype=np.float32)
        labels, inertia = _accel.kmeans_assign(rows, centers, self.device)
        return X, labels, inertia

    def predict(self, X):
        return self._assign(X)[1]

    def fit_predict(self, X, y=None):
        return self.fit(X).labels_

    def transform(self, X):
        check_is_fitted(self)
        X, _ = self._rows(X, reset=False)
        return euclidean_distances(X, self.cluster_centers_.astype(X.dtype, copy=False))

    def score(self, X, y=None):
        return -float(self._assign(X)[2])

    def _more_tags(self):
        return {"preserves_dtype": [np.float64, np.float32]}


# ---- SVMs ----

_SVM_FINITE = _unchecked_finite()


def _csr(X):
    """X (validated: dense float or scipy CSR) in accel's CSR layout."""
    if sp.issparse(X):
        X = X.tocsr()
        if not X.has_canonical_format:
            X = X.copy()
            X.sum_duplicates()
        if X.shape[1] > np.iinfo(np.int32).max:
            raise ValueError(f"X has {X.shape[1]} features; accel's CSR columns are 32-bit")
        return _accel.csr(X.indptr.astype(np.int64, copy=False), X.indices.astype(np.int32, copy=False),
                          X.data.astype(np.float32, copy=False), X.shape[1])
    if X.dtype not in (np.float32, np.float64):
        X = X.astype(np.float64)
    return _accel.csr_dense(np.ascontiguousarray(X))


class _BaseSVM(BaseEstimator):
    """What every SVM estimator shares: parameters, fitting, the model's
    attributes in scikit-learn's layout, pickling."""

    _impl = None  # accel's type name

    def _check_params(self):
        """The parameters' ranges, before any data is looked at; each type
        checks its own (C, nu, epsilon) first."""
        _check_choice("kernel", self.kernel, {"linear", "poly", "rbf", "sigmoid"})
        _check_int("degree", self.degree, 0)
        _check_real("coef0", self.coef0, -np.inf)
        _check_real("tol", self.tol, 0, closed_low=False)
        _check_real("cache_size", self.cache_size, 0, closed_low=False)
        if isinstance(self.gamma, str):
            _check_choice("gamma", self.gamma, {"scale", "auto"})
        else:
            _check_real("gamma", self.gamma, 0, closed_low=False)

    def _gamma_of(self, n_features, var):
        """gamma as scikit-learn resolves it; var: the variance of X's
        values, which only gamma='scale' needs (a callable giving it)."""
        if self.gamma == "auto":
            return 1.0 / n_features
        if self.gamma == "scale":
            v = var()
            return 1.0 / (n_features * v) if v != 0 else 1.0
        return float(self.gamma)

    def _params(self, n_features, X):
        self._check_params()

        def var():
            with np.errstate(over="ignore", invalid="ignore"):  # NaN/Inf are refused in accel, with their words
                return (X.multiply(X)).mean() - X.mean() ** 2 if sp.issparse(X) else X.var()

        return self._params_with(self._gamma_of(n_features, var))

    def _params_with(self, gamma):
        """The parameters accel trains with, gamma resolved."""
        self._gamma = gamma
        return {"type": self._impl, "kernel": self.kernel, "degree": int(self.degree), "gamma": float(gamma),
                "coef0": float(self.coef0), "C": float(getattr(self, "C", 1.0)), "nu": float(getattr(self, "nu", 0.5)),
                "epsilon": float(getattr(self, "epsilon", 0.1)), "tol": float(self.tol),
                "cache_size": float(self.cache_size), "shrinking": bool(self.shrinking),
                "probability": bool(getattr(self, "probability", False)), "weights": []}

    def _fit(self, X, labels, params):
        self._sparse = sp.issparse(X)
        self._accel_params = params
        self._model = _accel.svm_fit(_csr(X), np.asarray(labels, dtype=np.float64), params, self.device,
                                     _progress(self))
        self._set_attributes(self._model, X.shape)
        return self

    def _set_attributes(self, m, shape):
        sv = m.sv
        self.support_ = np.asarray(m.sv_rows, dtype=np.int32)
        vectors = sp.csr_matrix((sv.data.astype(np.float64), sv.indices, sv.indptr), shape=(sv.rows, shape[1]))
        self.support_vectors_ = vectors if self._sparse else vectors.toarray()
        self._dual_coef = m.coef
        self._intercept = -np.asarray(m.rho, dtype=np.float64)
        self._n_support = np.asarray(m.n_sv, dtype=np.int32)
        self._labels = list(m.labels)
        self.probA_ = np.asarray(m.prob_a, dtype=np.float64)
        self.probB_ = np.asarray(m.prob_b, dtype=np.float64)
        self.dual_coef_, self.intercept_ = self._dual_coef, self._intercept
        self.fit_status_ = 0
        self.shape_fit_ = shape
        self.n_iter_ = np.asarray(m.iterations, dtype=np.int32)  # SMO iterations per binary problem

    @property
    def n_support_(self):
        check_is_fitted(self)
        if self._impl in ("c_svc", "nu_svc"):
            return self._n_support
        return np.array([self.support_.shape[0]], dtype=np.int32)

    @property
    def coef_(self):
        """Linear kernel: the primal weights, one row per class pair (scikit-learn's layout)."""
        if self.kernel != "linear":
            raise AttributeError("coef_ is only available when using a linear kernel")
        check_is_fitted(self)
        sv = self.support_vectors_
        if self.dual_coef_.shape[0] == 1:
            return np.asarray(sv.T @ self.dual_coef_.T).T
        # Pair (a, b): class a's vectors weigh with their row b - 1, class b's
        # with their row a (LIBSVM's layout of dual_coef_).
        at = np.concatenate([[0], np.cumsum(self._n_support)])
        k = len(self._n_support)
        rows = []
        for a in range(k):
            for b in range(a + 1, k):
                wa = self.dual_coef_[b - 1, at[a]:at[a + 1]] @ sv[at[a]:at[a + 1]]
                wb = self.dual_coef_[a, at[b]:at[b + 1]] @ sv[at[b]:at[b + 1]]
                rows.append(np.asarray(wa + wb).ravel())
        return np.vstack(rows)

    def _rows(self, X):
        check_is_fitted(self)
        return _validate(self, X, reset=False, accept_sparse="csr", dtype=[np.float64, np.float32], order="C",
                         **_SVM_FINITE)

    def _accel_model(self):
        """The model accel computes with: the fitted one, or (unpickled) one
        rebuilt from the attributes."""
        if getattr(self, "_model", None) is None:
            self._model = _accel.svm_model(self._accel_params, _csr(self.support_vectors_), self._labels,
                                           list(-self._intercept), [int(c) for c in self._n_support],
                                           [list(r) for r in np.atleast_2d(self._dual_coef)], list(self.probA_),
                                           list(self.probB_))
        return self._model

    def _decision(self, X):
        """accel's decision values: (n, pairs) for classification, (n, 1) otherwise."""
        X = self._rows(X)
        return _accel.svm_decision(self._accel_model(), _csr(X), self.device)

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("_model", None)  # rebuilt from the attributes when needed
        return state

    def _more_tags(self):
        return {"preserves_dtype": []}


_COMMON_DOC = """
    Parameters as scikit-learn's, computed by accel's batched SMO with
    adaptive shrinking. shrinking=True lets accel choose when to shrink.
    device: accel's device spec for the kernel rows ('cpu', 'opencl', ...).
    Not supported: sample_weight, max_iter, random_state, break_ties.
"""


class _BaseClassifier(ClassifierMixin, _BaseSVM):
    def fit(self, X, y):
        X, y = _validate(self, X, y, accept_sparse="csr", dtype=[np.float64, np.float32], order="C", **_SVM_FINITE)
        check_classification_targets(y)
        self.classes_, idx = np.unique(y, return_inverse=True)
        if len(self.classes_) < 2:
            raise ValueError(f"The number of classes has to be greater than one; got {len(self.classes_)} class")
        _check_choice("decision_function_shape", self.decision_function_shape, {"ovo", "ovr"})
        params = self._params(X.shape[1], X)
        self.class_weight_ = compute_class_weight(self.class_weight, classes=self.classes_, y=y)
        params["weights"] = [(i, float(w)) for i, w in enumerate(self.class_weight_) if w != 1.0]
        self._fit(X, idx, params)
        if len(self.classes_) == 2:  # scikit-learn's sign: positive for classes_[1]
            self.dual_coef_, self.intercept_ = -self._dual_coef, -self._intercept
        return self

    def _ovo(self, X):
        return self._decision(X)

    def decision_function(self, X):
        dec = self._ovo(X)
        if len(self.classes_) == 2:
            return -dec.ravel()
        if self.decision_function_shape == "ovr":
            return _ovr_decision_function(dec < 0, -dec, len(self.classes_))
        return dec

    def predict(self, X):
        dec = self._ovo(X)
        k = len(self.classes_)
        votes = np.zeros((dec.shape[0], k), dtype=np.int64)
        p = 0
        for a in range(k):  # LIBSVM's vote: pair (a, b) positive for a; ties go to the first class
            for b in range(a + 1, k):
                win = dec[:, p] > 0
                votes[win, a] += 1
                votes[~win, b] += 1
                p += 1
        return self.classes_[np.argmax(votes, axis=1)]

    def _check_proba(self):
        if not self.probability:
            raise AttributeError("predict_proba is not available when probability=False")
        return True

    @available_if(_check_proba)
    def predict_proba(self, X):
        X = self._rows(X)
        return _accel.svm_proba(self._accel_model(), _csr(X), self.device)

    @available_if(_check_proba)
    def predict_log_proba(self, X):
        return np.log(self.predict_proba(X))


class SVC(_BaseClassifier):
    __doc__ = "C-support vector classification (LIBSVM's C-SVC) by accel." + _COMMON_DOC
    _impl = "c_svc"

    def __init__(self, *, C=1.0, kernel="rbf", degree=3, gamma="scale", coef0=0.0, shrinking=True, probability=False,
                 tol=1e-3, cache_size=200, class_weight=None, verbose=False, decision_function_shape="ovr",
                 device="cpu"):
        self.C = C
        self.kernel = kernel
        self.degree = degree
        self.gamma = gamma
        self.coef0 = coef0
        self.shrinking = shrinking
        self.probability = probability
        self.tol = tol
        self.cache_size = cache_size
        self.class_weight = class_weight
        self.verbose = verbose
        self.decision_function_shape = decision_function_shape
        self.device = device

    def _check_params(self):
        _check_real("C", self.C, 0, closed_low=False)
        super()._check_params()


class NuSVC(_BaseClassifier):
    __doc__ = "Nu-support vector classification (LIBSVM's nu-SVC) by accel." + _COMMON_DOC
    _impl = "nu_svc"

    def __init__(self, *, nu=0.5, kernel="rbf", degree=3, gamma="scale", coef0=0.0, shrinking=True,
                 probability=False, tol=1e-3, cache_size=200, class_weight=None, verbose=False,
                 decision_function_shape="ovr", device="cpu"):
        self.nu = nu
        self.kernel = kernel
        self.degree = degree
        self.gamma = gamma
        self.coef0 = coef0
        self.shrinking = shrinking
        self.probability = probability
        self.tol = tol
        self.cache_size = cache_size
        self.class_weight = class_weight
        self.verbose = verbose
        self.decision_function_shape = decision_function_shape
        self.device = device

    def _check_params(self):
        _check_real("nu", self.nu, 0, closed_low=False, high=1)
        super()._check_params()


class _BaseRegressor(RegressorMixin, _BaseSVM):
    def fit(self, X, y):
        X, y = _validate(self, X, y, accept_sparse="csr", dtype=[np.float64, np.float32], order="C", y_numeric=True,
                         **_SVM_FINITE)
        return self._fit(X, np.asarray(y, dtype=np.float64), self._params(X.shape[1], X))

    def predict(self, X):
        return self._decision(X).ravel()


class SVR(_BaseRegressor):
    __doc__ = "Epsilon-support vector regression (LIBSVM's epsilon-SVR) by accel." + _COMMON_DOC
    _impl = "epsilon_svr"

    def __init__(self, *, kernel="rbf", degree=3, gamma="scale", coef0=0.0, tol=1e-3, C=1.0, epsilon=0.1,
                 shrinking=True, cache_size=200, verbose=False, device="cpu"):
        self.kernel = kernel
        self.degree = degree
        self.gamma = gamma
        self.coef0 = coef0
        self.tol = tol
        self.C = C
        self.epsilon = epsilon
        self.shrinking = shrinking
        self.cache_size = cache_size
        self.verbose = verbose
        self.device = device

    def _check_params(self):
        _check_real("C", self.C, 0, closed_low=False)
        _check_real("epsilon", self.epsilon, 0)
        super()._check_params()


class NuSVR(_BaseRegressor):
    __doc__ = "Nu-support vector regression (LIBSVM's nu-SVR) by accel." + _COMMON_DOC
    _impl = "nu_svr"

    def __init__(self, *, nu=0.5, C=1.0, kernel="rbf", degree=3, gamma="scale", coef0=0.0, shrinking=True,
                 tol=1e-3, cache_size=200, verbose=False, device="cpu"):
        self.nu = nu
        self.C = C
        self.kernel = kernel
        self.degree = degree
        self.gamma = gamma
        self.coef0 = coef0
        self.shrinking = shrinking
        self.tol = tol
        self.cache_size = cache_size
        self.verbose = verbose
        self.device = device

    def _check_params(self):
        _check_real("nu", self.nu, 0, closed_low=False, high=1)
        _check_real("C", self.C, 0, closed_low=False)
        super()._check_params()


class OneClassSVM(OutlierMixin, _BaseSVM):
    __doc__ = "Unsupervised outlier detection (LIBSVM's one-class SVM) by accel." + _COMMON_DOC
    _impl = "one_class"

    def __init__(self, *, kernel="rbf", degree=3, gamma="scale", coef0=0.0, tol=1e-3, nu=0.5, shrinking=True,
                 cache_size=200, verbose=False, device="cpu"):
        self.kernel = kernel
        self.degree = degree
        self.gamma = gamma
        self.coef0 = coef0
        self.tol = tol
        self.nu = nu
        self.shrinking = shrinking
        self.cache_size = cache_size
        self.verbose = verbose
        self.device = device

    def _check_params(self):
        _check_real("nu", self.nu, 0, closed_low=False, high=1)
        super()._check_params()

    def fit(self, X, y=None):
        X = _validate(self, X, accept_sparse="csr", dtype=[np.float64, np.float32], order="C", **_SVM_FINITE)
        self._fit(X, np.zeros(X.shape[0]), self._params(X.shape[1], X))
        self.offset_ = -self._intercept
        return self

    def decision_function(self, X):
        return self._decision(X).ravel()

    def score_samples(self, X):
        return self.decision_function(X) + self.offset_

    def predict(self, X):
        return np.where(self.decision_function(X) > 0, 1, -1)
