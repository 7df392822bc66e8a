#!/usr/bin/env bash
# Installs llama-cpp-python into a virtual environment without compiling llama.cpp: the binding's
# Python code only (its CMake option LLAMA_BUILD=OFF), with llama.cpp's shared libraries taken from
# the npm package @node-llama-cpp/linux-x64 (prebuilt for node-llama-cpp on Ubuntu 22.04, glibc
# 2.34 or newer). scripts/install.sh tries this first and compiles from source when it fails.
#
# The two are pinned together: llama-cpp-python 0.3.36 vendors a llama.cpp a little newer than the
# package's release v0.5.0, and llama.h differs between them only by functions added since, which
# the Llama class does not call. scripts/llama_shim.c, compiled here as the binding's libllama.so,
# defines those as stops and links the prebuilt library for the rest (see the comment there).
#
# ggml's CPU code comes in variants by instruction set; only those up to AVX2 ("haswell") are
# installed, so the best one ggml picks on a CPU with AVX2 runs the same instructions as the source
# build (-DGGML_NATIVE=OFF: AVX2, FMA, F16C); the AVX-512 and AMX variants give another greedy
# output on the embedded model. Older CPUs get the SSE4.2 or plain x86-64 variant.
#
# Usage:
#   scripts/llama_prebuilt.sh VENV            the whole of it: the binding installed into VENV, placed
#   scripts/llama_prebuilt.sh fetch VENV DIR  the libraries and the binding's wheel into DIR; VENV's
#                                             pip builds the wheel and VENV is left as it is
#   scripts/llama_prebuilt.sh place VENV DIR  the binding, installed meanwhile from DIR's wheel: the
#                                             libraries put beside it and checked, DIR removed
#   scripts/llama_prebuilt.sh usable VENV     whether this machine can have it (Linux x86-64, npm, a
#                                             C compiler), without fetching anything
# scripts/install.sh fetches while torch installs, installs the wheel in the same pip run as the
# other packages (one resolution) and places it last. Environment: NPM (default npm), CC (default
# cc). Exits non-zero when a step fails; the whole form uninstalls the binding again (after `place`,
# scripts/install.sh removes it before compiling from source).
set -euo pipefail

usage='usage: llama_prebuilt.sh [fetch|place|usable] VENV [DIR]'
MODE=all
case "${1:-}" in
  fetch | place | usable) MODE=$1 && shift ;;
esac
VENV=${1:?$usage}
DIR=${2:-}
if [ "$MODE" = fetch ] || [ "$MODE" = place ] && [ -z "$DIR" ]; then
  echo "$usage" >&2
  exit 2
fi
NPM=${NPM:-npm}
CC=${CC:-cc}
HERE=$(cd "$(dirname "$0")" && pwd)
BINDING='llama-cpp-python==0.3.36'
PACKAGE='@node-llama-cpp/linux-x64@3.22.1'
TARBALL='node-llama-cpp-linux-x64-3.22.1.tgz'
TARBALL_SHA256='0d953e1503d5ab4608d8ed5b739132308c81ac05ffeb760d2a7f30e08a9f90e0'
LIBS='libllama.v0.5.0.so libggml.v0.5.0.so libggml-base.so'
CPU_VARIANTS='x64 sse42 sandybridge haswell'

fail() {
  echo "prebuilt llama.cpp: $*" >&2
  exit 1
}

# What this machine must have; `usable` checks only this, at once, so that scripts/install.sh can
# start the compile from source right away when it is missing.
usable() {
  [ "$(uname -s)/$(uname -m)" = Linux/x86_64 ] || fail "built for Linux x86-64 only, this is $(uname -s)/$(uname -m)"
  command -v "$NPM" >/dev/null || fail "npm is not installed"
  command -v "$CC" >/dev/null || fail "no C compiler ($CC)"
}

# fetch DIR: the npm package's libraries into DIR/bins, the binding's wheel (its Python code only:
# CMake option LLAMA_BUILD=OFF) into DIR/wheel. Nothing is installed.
fetch() {
  local dir=$1
  usable
  rm -rf "$dir"
  mkdir -p "$dir/npm"
  echo "== npm pack $PACKAGE"
  (cd "$dir/npm" && "$NPM" pack --silent "$PACKAGE") || fail "npm pack $PACKAGE failed"
  echo "$TARBALL_SHA256  $dir/npm/$TARBALL" | sha256sum --check --quiet - || fail "$TARBALL: unexpected sha256"
  tar -xzf "$dir/npm/$TARBALL" -C "$dir/npm"
  mv "$dir/npm/package/bins/linux-x64" "$dir/bins"
  rm -rf "$dir/npm"
  echo "== $BINDING, its Python code only, as a wheel"
  CMAKE_ARGS='-DLLAMA_BUILD=OFF -DLLAVA_BUILD=OFF' \
    "$VENV/bin/pip" wheel --no-deps --no-cache-dir --wheel-dir "$dir/wheel" "$BINDING"
}

# place DIR: the libraries from DIR/bins beside the installed binding, its libllama.so the shim
# over them; then the binding loads with a CPU backend.
place() {
  local dir=$1 lib f v
  lib=$("$VENV/bin/python" -c 'import importlib.util, pathlib; print(pathlib.Path(importlib.util.find_spec("llama_cpp").origin).parent / "lib")')
  echo "== llama.cpp libraries into $lib"
  rm -rf "$lib"
  mkdir -p "$lib"
  for f in $LIBS; do cp "$dir/bins/$f" "$lib/"; done
  for v in $CPU_VARIANTS; do cp "$dir/bins/libggml-cpu-$v.so" "$lib/"; done
  ln -s libggml.v0.5.0.so "$lib/libggml.so" # the name the binding's ggml module loads
  "$CC" -shared -fPIC -O2 -o "$lib/libllama.so" "$HERE/llama_shim.c" \
    -Wl,--no-as-needed -L"$lib" -l:libllama.v0.5.0.so -l:libggml.v0.5.0.so -l:libggml-base.so -ldl -Wl,-rpath,'$ORIGIN'
  rm -rf "$dir"

  echo "== the binding loads, with a CPU backend"
  "$VENV/bin/python" - <<'PY'
import ctypes
import re

import llama_cpp

lib = llama_cpp.llama_cpp._lib
lib.ggml_backend_reg_by_name.restype = ctypes.c_void_p
if not lib.ggml_backend_reg_by_name(b"CPU"):
    raise SystemExit("no CPU backend was loaded")
with open("/proc/self/maps") as maps:
    variant = sorted(set(re.findall(r"libggml-cpu-(\w+)\.so", maps.read())))
print("llama.cpp", llama_cpp.llama_cpp.llama_print_system_info().decode().strip())
print("CPU variant:", ", ".join(variant) or "none")
PY
}

case "$MODE" in
  usable) usable ;;
  fetch) fetch "$DIR" ;;
  place) place "$DIR" ;;
  all)
    tmp=$(mktemp -d)
    installed=0
    cleanup() {
      local rc=$?
      rm -rf "$tmp"
      if [ "$rc" -ne 0 ] && [ "$installed" = 1 ]; then
        local dir
        dir=$("$VENV/bin/python" -c 'import importlib.util, pathlib; s = importlib.util.find_spec("llama_cpp"); print(pathlib.Path(s.origin).parent if s else "")' || true)
        "$VENV/bin/pip" uninstall --yes --quiet llama-cpp-python || true
        [ -n "$dir" ] && rm -rf "$dir"
      fi
      return "$rc"
    }
    trap cleanup EXIT
    fetch "$tmp/prebuilt"
    installed=1
    echo "== the binding's wheel, with what it requires"
    "$VENV/bin/pip" install --no-cache-dir "$tmp"/prebuilt/wheel/llama_cpp_python-*.whl
    place "$tmp/prebuilt"
    ;;
esac
