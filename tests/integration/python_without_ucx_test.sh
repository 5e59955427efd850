#!/usr/bin/env bash
# `pip install .` without UCX (ACCEL_WITH_UCX=OFF, as on a machine without
# libucx-dev, where the default AUTO finds none): the package builds,
# imports from outside the tree, runs top-k and the scikit-learn
# estimators, links neither UCX nor the transport, and SparseGroup says
# why it is missing.
# BUILD is the regular build: the pip build goes to its sibling
# BUILD-pip-without and compiles through its ccache (pip_ccache.sh), where
# python.pip_install's build left what both compile. CUDA is configured as
# there (the default), so that the compile flags match.
set -euo pipefail
ROOT="$1"
PY="$2"
BUILD="$3"
PIP_BUILD="$BUILD-pip-without"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
rm -rf "$PIP_BUILD"
. "$(dirname "$0")/pip_ccache.sh"
pip_ccache "$ROOT" "$BUILD"
"$PY" -m venv --system-site-packages "$TMP/venv"
(cd "$TMP" && "$TMP/venv/bin/pip" install -q --disable-pip-version-check ${CCACHE_ARGS[@]+"${CCACHE_ARGS[@]}"} \
  --config-settings=cmake.define.ACCEL_WITH_UCX=OFF --config-settings=build-dir="$PIP_BUILD" \
  "$ROOT" >"$TMP/pip.log" 2>&1) || { tail -30 "$TMP/pip.log"; exit 1; }
pip_ccache_stats
SO="$(ls "$TMP"/venv/lib/python3*/site-packages/accel/_accel*.so)"
if ldd "$SO" | grep -E 'libuc[pst]|accel_transport'; then
  echo "the module links UCX or the transport" >&2
  exit 1
fi
cd "$TMP"
"$TMP/venv/bin/python" - <<'PY'
import sys
import numpy as np
import accel
from accel.sklearn import KMeans, SVC
assert accel.__file__.startswith(sys.prefix), accel.__file__
x = np.random.default_rng(0).laplace(0, 1, 100000).astype(np.float32)
assert accel.topk(x, 0.001, method="exact").k == 100
km = KMeans(2, random_state=0).fit(np.array([[0, 0], [0, 1], [9, 9], [9, 8]], np.float32))
assert sorted(np.bincount(km.labels_).tolist()) == [2, 2], km.labels_
assert SVC().fit([[0, 0], [1, 1], [5, 5], [6, 6]], [0, 0, 1, 1]).predict([[5.5, 5.5]]).tolist() == [1]
try:
    accel.SparseGroup(rank=0, size=1)
    raise SystemExit("SparseGroup worked in a build without UCX")
except ImportError as e:
    assert "without UCX" in str(e) and "libucx-dev" in str(e), e
    print("pip install . without UCX: estimators and top-k work; SparseGroup:", e)
PY
