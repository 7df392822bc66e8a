#!/usr/bin/env bash
# Builds the virtual environment step by step for `make install` (and so `make run`/`make test`).
# Each step says what it does and how long it usually takes, shows the time elapsed while it runs,
# and writes its output to $VENV/install.log; when a step fails, the end of that log is printed.
#
# Environment: PYTHON (default python3), VENV (default .venv).
set -euo pipefail

PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
BIN=$VENV/bin
LOG=$VENV/install.log
# llama-cpp-python pinned; built from source without -march=native (see the llama step).
LLAMA_SOURCE_SPEC='llama-cpp-python==0.3.36'

TTY=0
[ -t 2 ] && TTY=1

fmt() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

# step N TOTAL "what" "usual duration" command...
step() {
  local n=$1 total=$2 what=$3 usual=$4
  shift 4
  local start now pid rc
  start=$(date +%s)
  printf '[%s/%s] %s (usually %s)\n' "$n" "$total" "$what" "$usual" >&2
  echo "== [$n/$total] $what: $*" >>"$LOG"
  "$@" >>"$LOG" 2>&1 &
  pid=$!
  # Show the elapsed time while the step runs: in place on a terminal, a line a minute otherwise.
  local last=0
  while kill -0 "$pid" 2>/dev/null; do
    sleep 1
    now=$(date +%s)
    if [ "$TTY" = 1 ]; then
      printf '\r      %s elapsed ' "$(fmt $((now - start)))" >&2
    elif [ $((now - last)) -ge 60 ] && [ $((now - start)) -ge 60 ]; then
      printf '      still running, %s elapsed\n' "$(fmt $((now - start)))" >&2
      last=$now
    fi
  done
  rc=0
  wait "$pid" || rc=$?
  now=$(date +%s)
  [ "$TTY" = 1 ] && printf '\r\033[K' >&2
  if [ "$rc" -ne 0 ]; then
    printf '      failed after %s (exit %s); the end of %s:\n' "$(fmt $((now - start)))" "$rc" "$LOG" >&2
    tail -n 40 "$LOG" | sed 's/^/      | /' >&2
    exit "$rc"
  fi
  printf '      done in %s\n' "$(fmt $((now - start)))" >&2
}

mkdir -p "$VENV"
: >"$LOG"
TOTAL=5
begin=$(date +%s)

step 1 $TOTAL "virtual environment in $VENV" "a few seconds" \
  sh -c "test -x '$BIN/python' || '$PYTHON' -m venv '$VENV'"
step 2 $TOTAL "pip and wheel" "10 s" \
  "$BIN/pip" install --upgrade pip wheel
# torch first and pinned: the CPU wheel (any other spec pulls gigabytes of CUDA libraries).
step 3 $TOTAL "torch 2.13 for CPU (the classifier's encoder)" "1 min" \
  "$BIN/pip" install 'torch==2.13.0'

# llama.cpp, the embedded model's runtime. Built from source for portable x86-64 (no -march=native):
# on CPUs that report AMX the native build segfaults in ggml_backend_amx_mul_mat on the first decode.
# --no-cache-dir: never reuse a wheel built natively by an earlier install.
llama_source() {
  CMAKE_ARGS="-DGGML_NATIVE=OFF" "$BIN/pip" install --no-cache-dir "$LLAMA_SOURCE_SPEC"
}
if "$BIN/python" -c 'import llama_cpp' 2>/dev/null; then
  printf '[4/%s] llama.cpp: already installed\n' $TOTAL >&2
else
  step 4 $TOTAL "llama.cpp, compiled from source (all output in $LOG)" "several minutes on 2 cores; far longer on a busy machine" \
    llama_source
fi

step 5 $TOTAL "psychoalign and its dependencies (editable, with the dev tools)" "1-2 min" \
  "$BIN/pip" install -e '.[dev]'

printf 'Installed in %s. Activate with: source %s/bin/activate\n' "$(fmt $(($(date +%s) - begin)))" "$VENV" >&2
