#!/usr/bin/env bash
# `pip install .` of the repository into a fresh virtual environment (the
# build backend, scikit-build-core, comes from PyPI), then the installed
# package imported from outside the tree and used.
# BUILD (default: none) is the regular build: the pip build goes to its
# sibling BUILD-pip-with and compiles through its ccache (pip_ccache.sh).
set -euo pipefail
ROOT="$1"
PY="${2:-/usr/bin/python3}"
BUILD="${3:-}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
. "$(dirname "$0")/pip_ccache.sh"
if [ -n "$BUILD" ]; then
  PIP_BUILD="$BUILD-pip-with"
  pip_ccache "$ROOT" "$BUILD"
else
  PIP_BUILD="$TMP/build"
  CCACHE_ARGS=()
fi
rm -rf "$PIP_BUILD"
"$PY" -m venv --system-site-packages "$TMP/venv"
(cd "$TMP" && "$TMP/venv/bin/pip" install -q --disable-pip-version-check ${CCACHE_ARGS[@]+"${CCACHE_ARGS[@]}"} \
  --config-settings=build-dir="$PIP_BUILD" "$ROOT")
[ -z "$BUILD" ] || pip_ccache_stats
cd "$TMP"
"$TMP/venv/bin/python" - <<'PY'
import numpy as np
import accel
import accel.torch  # noqa: F401
assert accel.__file__.startswith(__import__("sys").prefix), accel.__file__
x = np.random.default_rng(0).laplace(0, 1, 100000).astype(np.float32)
r = accel.topk(x, 0.001, method="exact")
assert r.k == 100 and r.indices.size == 100, (r.k, r.indices.size)
with accel.SparseGroup(rank=0, size=1) as g:
    s = g.allreduce(10, np.array([2]), np.array([1.5], np.float32))
    assert s["indices"].tolist() == [2]
from accel.sklearn import KMeans, SVC  # scikit-learn from the system's site packages
km = KMeans(2, random_state=0).fit(np.array([[0, 0], [0, 1], [9, 9], [9, 8]], np.float32))
assert sorted(np.bincount(km.labels_).tolist()) == [2, 2], km.labels_
assert SVC().fit([[0, 0], [1, 1], [5, 5], [6, 6]], [0, 0, 1, 1]).predict([[5.5, 5.5]]).tolist() == [1]
print("pip install . ->", accel.__file__)
PY
