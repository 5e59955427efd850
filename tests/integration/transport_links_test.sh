#!/usr/bin/env bash
# The transport is the lowest layer: its library needs accel::core, UCX,
# OpenSSL's libcrypto (the control messages' MACs), the C/C++ runtime and,
# in a sanitizer build, the sanitizers' runtimes (which also bring in
# UCX's libucm); nothing else of the host (no libaccel, the runtime).
set -euo pipefail
LIB="$1"
needed=$(readelf -d "$LIB" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
[ -n "$needed" ] || { echo "no NEEDED entries in $LIB" >&2; exit 1; }
bad=$(echo "$needed" | grep -vE '^(libaccel_core|libuc[mpst]|libcrypto|libstdc\+\+|libgcc_s|libc|libm|lib(a|ub|t|l)san)\.so' || true)
if [ -n "$bad" ]; then
  echo "$LIB needs more than core, UCX and the C runtime: $bad" >&2
  exit 1
fi
echo "$LIB needs:" $needed
