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
# Usage: scripts/llama_prebuilt.sh VENV. Environment: NPM (default npm), CC (default cc).
# Exits non-zero, with the binding uninstalled again, when any step fails.
set -euo pipefail

VENV=${1:?usage: llama_prebuilt.sh VENV}
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

[ "$(uname -s)/$(uname -m)" = Linux/x86_64 ] || fail "built for Linux x86-64 only, this is $(uname -s)/$(uname -m)"
command -v "$NPM" >/dev/null || fail "npm is not installed"
command -v "$CC" >/dev/null || fail "no C compiler ($CC)"

tmp=$(mktemp -d)
installed=0
cleanup() {
  local rc=$?
  rm -rf "$tmp"
  if [ "$rc" -ne 0 ] && [ "$installed" = 1 ]; then
    "$VENV/bin/pip" uninstall --yes --quiet llama-cpp-python || true
    [ -n "${lib:-}" ] && rm -rf "$lib"
  fi
  return "$rc"
}
trap cleanup EXIT

echo "== npm pack $PACKAGE"
(cd "$tmp" && "$NPM" pack --silent "$PACKAGE") || fail "npm pack $PACKAGE failed"
echo "$TARBALL_SHA256  $tmp/$TARBALL" | sha256sum --check --quiet - || fail "$TARBALL: unexpected sha256"
tar -xzf "$tmp/$TARBALL" -C "$tmp"
bins=$tmp/package/bins/linux-x64

echo "== $BINDING, its Python code only"
installed=1
CMAKE_ARGS='-DLLAMA_BUILD=OFF -DLLAVA_BUILD=OFF' "$VENV/bin/pip" install --no-cache-dir "$BINDING"
lib=$("$VENV/bin/python" -c 'import importlib.util, pathlib; print(pathlib.Path(importlib.util.find_spec("llama_cpp").origin).parent / "lib")')

echo "== llama.cpp libraries into $lib"
rm -rf "$lib"
mkdir -p "$lib"
for f in $LIBS; do cp "$bins/$f" "$lib/"; done
for v in $CPU_VARIANTS; do cp "$bins/libggml-cpu-$v.so" "$lib/"; done
ln -s libggml.v0.5.0.so "$lib/libggml.so" # the name the binding's ggml module loads
"$CC" -shared -fPIC -O2 -o "$lib/libllama.so" "$HERE/llama_shim.c" \
  -Wl,--no-as-needed -L"$lib" -l:libllama.v0.5.0.so -l:libggml.v0.5.0.so -l:libggml-base.so -ldl -Wl,-rpath,'$ORIGIN'

echo "== the binding loads, with a CPU backend"
"$VENV/bin/python" - <<'EOF'
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
EOF
