#!/usr/bin/env bash
# Builds the FPGA bitstream: v++ -c per kernel in kernels_hls/, v++ -l into
# one xclbin, then records it in bitstreams/manifest.json for the xrt driver.
#   scripts/build_bitstreams.sh --platform P --target sw_emu|hw_emu|hw [--kernels a,b] [--dry-run]
# P is a full Vitis platform name (xilinx_u250_gen3x16_xdma_4_1_202210_1); the
# connectivity config is kernels_hls/cfg/<longest cfg name that P starts with>.cfg.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PLATFORM="" TARGET="" KERNELS="" DRY=0
die() { echo "build_bitstreams.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --platform) PLATFORM="${2:-}"; shift 2 ;;
    --target) TARGET="${2:-}"; shift 2 ;;
    --kernels) KERNELS="${2:-}"; shift 2 ;;
    --dry-run) DRY=1; shift ;;
    -h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[ -n "$PLATFORM" ] || die "--platform is required (e.g. xilinx_u250_gen3x16_xdma_4_1_202210_1)"
case "$TARGET" in sw_emu|hw_emu|hw) ;; *) die "--target must be sw_emu, hw_emu or hw (got '$TARGET')" ;; esac

CFG=""
for c in "$ROOT"/kernels_hls/cfg/*.cfg; do
  base="$(basename "$c" .cfg)"
  case "$PLATFORM" in "$base"*) [ ${#base} -gt ${#CFG} ] && CFG="$base" ;; esac
done
[ -n "$CFG" ] || die "no connectivity config for platform '$PLATFORM' in kernels_hls/cfg/ (have: $(cd "$ROOT/kernels_hls/cfg" && ls *.cfg | tr '\n' ' '))"

if [ -z "$KERNELS" ]; then
  KERNELS="$(cd "$ROOT/kernels_hls" && ls *.cpp | sed 's/\.cpp$//' | paste -sd, -)"
fi
OUTDIR="bitstreams/$PLATFORM/$TARGET"
XODIR="build/hls/$PLATFORM/$TARGET"
XCLBIN="$OUTDIR/accel.xclbin"

cmds=("mkdir -p $XODIR $OUTDIR")
xos=()
IFS=, read -ra klist <<<"$KERNELS"
for k in "${klist[@]}"; do
  [ -f "$ROOT/kernels_hls/$k.cpp" ] || die "no kernel source kernels_hls/$k.cpp"
  cmds+=("v++ -c -t $TARGET --platform $PLATFORM --config kernels_hls/cfg/$CFG.cfg -k $k -I kernels_hls/include --temp_dir $XODIR/tmp -o $XODIR/$k.xo kernels_hls/$k.cpp")
  xos+=("$XODIR/$k.xo")
done
cmds+=("v++ -l -t $TARGET --platform $PLATFORM --config kernels_hls/cfg/$CFG.cfg --temp_dir $XODIR/tmp -o $XCLBIN ${xos[*]}")

if [ "$DRY" -eq 1 ]; then
  printf '%s\n' "${cmds[@]}"
  echo "# then record $XCLBIN (kernels: $KERNELS) in bitstreams/manifest.json"
  exit 0
fi
command -v v++ >/dev/null || die "v++ not found on PATH: source the Vitis settings64.sh first (or use --dry-run to see the commands)"
[ -n "${XILINX_XRT:-}" ] || echo "build_bitstreams.sh: note: XILINX_XRT is not set; hw_emu runs will need it" >&2
cd "$ROOT"
for c in "${cmds[@]}"; do echo "+ $c"; eval "$c"; done

python3 - "$PLATFORM" "$TARGET" "$XCLBIN" "$KERNELS" <<'PY'
import json, os, sys
platform, target, xclbin, kernels = sys.argv[1:]
path = "bitstreams/manifest.json"
manifest = {"bitstreams": []}
if os.path.exists(path):
    with open(path) as f:
        manifest = json.load(f)
entries = [e for e in manifest.get("bitstreams", []) if not (e["platform"] == platform and e["target"] == target)]
entries.append({"platform": platform, "target": target,
                "xclbin": os.path.relpath(xclbin, "bitstreams"), "kernels": kernels.split(",")})
manifest["bitstreams"] = entries
tmp = path + ".tmp"
with open(tmp, "w") as f:
    json.dump(manifest, f, indent=2)
os.replace(tmp, path)
PY
echo "built $XCLBIN; manifest updated"
