#!/usr/bin/env bash
# Create the Python environment used by the benchmark scripts.
#
# Idempotent and silent when there is nothing to do, so other scripts can call
# it unconditionally before every benchmark run.
#
# The venv lives at $ACCEL_REPO/.bench-venv; ACCEL_REPO defaults to the parent
# of this script's directory (the script lives in scripts/).
set -euo pipefail

REPO="${ACCEL_REPO:-$(cd "$(dirname "$0")/.." && pwd)}"
VENV="$REPO/.bench-venv"

# Nothing is pinned: the benchmark compares against whatever current releases
# do, and all of these ship manylinux wheels for CPython 3.11 on x86_64.
REQUIREMENTS=(numpy scikit-learn scikit-learn-intelex faiss-cpu threadpoolctl matplotlib pyspark)

# The marker records exactly what was installed, so adding a package to the
# list above triggers a reinstall, while an unchanged list costs nothing.
MARKER="$VENV/.bench-requirements"
WANTED="$(printf '%s\n' "${REQUIREMENTS[@]}")"

if [[ -x "$VENV/bin/python" && -f "$MARKER" && "$(cat "$MARKER")" == "$WANTED" ]]; then
    exit 0
fi

echo "setup_bench: installing benchmark packages into $VENV" >&2
if [[ ! -x "$VENV/bin/python" ]]; then
    python3 -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${REQUIREMENTS[@]}"
# Written last, so an interrupted install is retried on the next call.
printf '%s\n' "$WANTED" > "$MARKER"
echo "setup_bench: done" >&2
