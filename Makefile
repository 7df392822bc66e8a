# Two entry points for a fresh machine: `make run` and `make test`. Both build .venv from scratch.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: install system run test lint typecheck unit bench clean

# Each install step announces itself with its usual duration and shows the time elapsed; pip's output
# goes to .venv/install.log, the llama.cpp compile's (in the background while the other packages
# install) to .venv/llama-build.log; a failed step prints the end of its log. What does not touch the
# venv runs beside what does (scripts/install.sh), so the install keeps both cores busy.
$(STAMP): pyproject.toml scripts/install.sh scripts/bytecode.py scripts/llama_cpp.cmake scripts/llama_prebuilt.sh scripts/llama_shim.c
	@PYTHON=$(PYTHON) VENV=$(VENV) bash scripts/install.sh
	@touch $(STAMP)

install: system $(STAMP)

# System packages (CI runs as root on a fresh machine): Debian's Chromium for the browser tests, and
# PostgreSQL for the postgres tests, set up by scripts/test_postgres.sh only where none is installed.
system:
	@command -v chromium >/dev/null 2>&1 || { \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium chromium-driver; }
	@bash scripts/test_postgres.sh

run: $(STAMP)
	$(BIN)/psychoalign negotiate --samples --rounds 2 --proposals 2

lint: $(STAMP)
	$(BIN)/ruff check src tests bench scripts

typecheck: $(STAMP)
	$(BIN)/mypy

unit: system $(STAMP)
	$(BIN)/pytest -q

test: lint typecheck unit

# Every benchmark; each rewrites its own section of docs/performance.md. The full run takes long
# (the embedded model's outcome checks, 200 lab participants at human pace). `make bench QUICK=1`
# runs each in its quick mode: fewer repetitions, and the section says so.
QUICK ?=
Q := $(if $(QUICK),--quick,)
BENCH_PG ?= postgresql://postgres@127.0.0.1:5432/test

bench: $(STAMP)
	$(BIN)/python bench/startup.py $(Q)
	$(BIN)/python bench/models.py $(Q)
	$(BIN)/python bench/negotiation.py $(Q)
	$(BIN)/python bench/a2a.py $(Q)
	$(BIN)/python bench/gateway.py $(Q)
	$(BIN)/python bench/experiments.py $(Q)
	$(BIN)/python bench/cross_turn.py $(Q)
	$(BIN)/python bench/cross_turn.py $(Q) --store $(BENCH_PG)
	$(BIN)/python bench/refusal_judge.py $(Q)
	$(BIN)/python bench/star.py
	$(BIN)/python bench/star_campaign.py $(Q)
	$(BIN)/python bench/star_analysis.py $(Q)
	$(BIN)/python bench/web.py $(if $(QUICK),--quick,--participants 200 --think-ms 10000 --dialogues 400)
	$(BIN)/python bench/overhead.py $(if $(QUICK),--quick,--check 34 --heldout --useful)
	$(BIN)/python bench/request_head.py $(if $(QUICK),--head-only,)
	$(BIN)/python bench/benchmark_requests.py
	$(if $(QUICK),,$(BIN)/python bench/startup.py --negotiate)

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
