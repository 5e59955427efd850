#!/usr/bin/env bash
# The main job on a built-in default: sets up, builds, lists the devices and
# clusters Fashion-MNIST (60,000 images, 784 features) into 10 groups.
# Without the dataset it clusters generated blobs instead.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
"$ROOT/scripts/setup.sh"
"$ROOT/scripts/build.sh"
ACCEL="${ACCEL_BUILD_DIR:-$ROOT/build}/bin/accel"
OUT="${ACCEL_DEMO_OUT:-$ROOT/build/demo}"
mkdir -p "$OUT"

echo "== devices"
"$ACCEL" devices
echo
DATA=/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz
if [ ! -r "$DATA" ]; then
  DATA="$OUT/blobs.csv"
  echo "== Fashion-MNIST not found; generating 100,000 points in 4 blobs: $DATA"
  awk 'BEGIN { srand(1); for (i = 0; i < 100000; i++) { c = i % 4;
         printf "%.4f,%.4f\n", 10*(c%2) + 2*(rand()-0.5), 10*int(c/2) + 2*(rand()-0.5) } }' > "$DATA"
fi
echo "== k-means, k=10, on $DATA"
"$ACCEL" kmeans --input "$DATA" --k 10 --init kmeans++ --max-iter 50 --seed 1 --device auto \
  --output-centroids "$OUT/centroids.npy" --output-labels "$OUT/labels.npy" --log-json "$OUT/iterations.jsonl"
echo
echo "outputs in $OUT: centroids.npy, labels.npy, iterations.jsonl"
