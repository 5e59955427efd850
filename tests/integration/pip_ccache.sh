# Sourced by the pip tests: ccache for their builds, where it is installed.
# The two pip builds (with and without UCX) compile the same sources with
# the same flags; with their build directories at the same depth and paths
# rewritten relative to them (base_dir), the second finds most of its
# objects in the first's cache and compiles again only what differs.
# Sets CCACHE_ARGS to the pip arguments that turn it on (none without
# ccache), and exports its settings; call it in the script's own shell.
pip_ccache() {  # ROOT CACHE_DIR
  CCACHE_ARGS=()
  command -v ccache >/dev/null || return 0
  export CCACHE_DIR="$2" CCACHE_NOHASHDIR=1 CCACHE_MAXSIZE=2G
  CCACHE_BASEDIR="$(/usr/bin/python3 -c 'import os, sys; print(os.path.commonpath(sys.argv[1:]))' "$1" "$2")"
  export CCACHE_BASEDIR
  CCACHE_ARGS=("--config-settings=cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache"
    "--config-settings=cmake.define.CMAKE_C_COMPILER_LAUNCHER=ccache"
    "--config-settings=cmake.define.CMAKE_CUDA_COMPILER_LAUNCHER=ccache")
}
