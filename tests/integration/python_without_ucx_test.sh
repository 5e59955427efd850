#!/usr/bin/env bash
# `pip install .` without UCX (ACCEL_WITH_UCX=OFF, as on a machine without
# libucx-dev, where the default AUTO finds none): the package builds,
# imports from outside the tree, runs top-k and the scikit-learn
# estimators, links neither UCX nor the transport, and SparseGroup says
# why it is missing.
# PIP_DIR: the build goes to PIP_DIR/without/build, beside python.pip_install's
# (PIP_DIR/with/build), whose ccache it reads (pip_ccache.sh). CUDA is
# configured as there (the default), so that the compile flags match.
set -euo pipefail
ROOT="$1"
PY="$2"
PIP_DIR="$3"
BUILD="$PIP_DIR/without"
rm -rf "$BUILD"
mkdir -p "$BUILD"
. "$(dirname "$0")/pip_ccache.sh"
pip_ccache "$ROOT" "$PIP_DIR/ccache"
"$PY" -m venv --system-site-packages "$BUILD/venv"
(cd "$BUILD" && "$BUILD/venv/bin/pip" install -q --disable-pip-version-check ${CCACHE_ARGS[@]+"${CCACHE_ARGS[@]}"} \
  --config-settings=cmake.define.ACCEL_WITH_UCX=OFF --config-settings=build-dir="$BUILD/build" \
  "$ROOT" >"$BUILD/pip.log" 2>&1) || { tail -30 "$BUILD/pip.log"; exit 1; }
command -v ccache >/dev/null && CCACHE_DIR="$PIP_DIR/ccache" ccache -s | grep -Ei "hits|misses" | head -3 || true
SO="$(ls "$BUILD"/venv/lib/python3*/site-packages/accel/_accel*.so)"
if ldd "$SO" | grep -E 'libuc[pst]|accel_transport'; then
  echo "the module links UCX or the transport" >&2
  exit 1
fi
cd "$BUILD"
"$BUILD/venv/bin/python" - <<'PY'
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
