#!/usr/bin/env bash
# The Python module of a build without UCX (ACCEL_WITH_UCX=OFF, as on a
# machine without libucx-dev): it builds, imports, runs top-k and the
# scikit-learn estimators, and SparseGroup says why it is missing.
set -euo pipefail
ROOT="$1"
PY="$2"
BUILD="$3"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DACCEL_WITH_UCX=OFF -DACCEL_WITH_CUDA=OFF -DACCEL_BUILD_TESTS=OFF \
  -DPython_EXECUTABLE="$PY" >"$BUILD.configure.log" 2>&1 || { tail -20 "$BUILD.configure.log"; exit 1; }
cmake --build "$BUILD" --target _accel >"$BUILD.build.log" 2>&1 || { tail -30 "$BUILD.build.log"; exit 1; }
if ldd "$BUILD"/python/accel/_accel*.so | grep -E 'libuc[pst]|accel_transport'; then
  echo "the module links UCX or the transport" >&2
  exit 1
fi
cd "$BUILD"
PYTHONPATH="$BUILD/python" "$PY" - <<'PY'
import numpy as np
import accel
from accel.sklearn import KMeans, SVC
x = np.random.default_rng(0).laplace(0, 1, 100000).astype(np.float32)
assert accel.topk(x, 0.001, method="exact").k == 100
km = KMeans(2, random_state=0).fit(np.array([[0, 0], [0, 1], [9, 9], [9, 8]], np.float32))
assert sorted(np.bincount(km.labels_).tolist()) == [2, 2], km.labels_
assert SVC().fit([[0, 0], [1, 1], [5, 5], [6, 6]], [0, 0, 1, 1]).predict([[5.5, 5.5]]).tolist() == [1]
try:
    accel.SparseGroup(rank=0, size=1)
    raise SystemExit("SparseGroup worked in a build without UCX")
except ImportError as e:
    assert "without UCX" in str(e), e
    print("without UCX: estimators and top-k work; SparseGroup:", e)
PY
