# Sourced by the pip tests: ccache for their builds, where it is installed,
# sharing the regular build's cache (CMakeLists.txt, "ccache"). The regular
# build BUILD compiles in BUILD/<dir>; a pip build in a sibling folder at
# the same depth (BUILD-pip-with, BUILD-pip-without) compiles the same
# sources with the same flags from <sibling>/<dir>. With paths under the
# source tree written relative to those folders (base_dir, in the cache's
# ccache.conf) the commands are the same, and the objects are found in
# the cache instead of compiled again. The pip builds use Make, as the
# regular build does (Ninja runs every compile from the build's root).
# Sets CCACHE_ARGS to the pip arguments that turn it on (none without
# ccache), and exports its settings; call it in the script's own shell.
pip_ccache() {  # ROOT BUILD
  CCACHE_ARGS=()
  export CMAKE_GENERATOR="Unix Makefiles" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)"
  command -v ccache >/dev/null || return 0
  # The regular build's settings (base_dir among them) are in the cache's
  # ccache.conf, which that build's configure wrote: none here overrides them.
  export CCACHE_DIR="$2/ccache"
  unset CCACHE_BASEDIR CCACHE_NOHASHDIR CCACHE_HASHDIR CCACHE_MAXSIZE
  CCACHE_ARGS=("--config-settings=cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache"
    "--config-settings=cmake.define.CMAKE_C_COMPILER_LAUNCHER=ccache"
    "--config-settings=cmake.define.CMAKE_CUDA_COMPILER_LAUNCHER=ccache")
  # The regular build's compilers, by the same names: pip's environment
  # names Debian's x86_64-linux-gnu-g++, which the cache tells apart from
  # c++ (measured: no hit from the regular build without this).
  local lang compiler
  for lang in C CXX; do
    compiler="$(sed -n "s/^CMAKE_${lang}_COMPILER:FILEPATH=//p" "$2/CMakeCache.txt" 2>/dev/null)"
    [ -z "$compiler" ] || CCACHE_ARGS+=("--config-settings=cmake.define.CMAKE_${lang}_COMPILER=$compiler")
  done
}

# The cache's hits and misses so far (where ccache is installed).
pip_ccache_stats() {
  command -v ccache >/dev/null && ccache -s 2>/dev/null | grep -Ei "hits|misses" | head -3 || true
}
