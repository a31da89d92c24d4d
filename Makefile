# Two entry points, both idempotent and safe on a fresh Debian machine with only python3:
#   make demo   set up .venv if needed, then run the whole study in miniature on this CPU
#   make test   set up .venv if needed, then run every test (what CI runs)
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
CORES   ?= 2
DEMO_CONFIG ?= demo/config.yaml
PYTEST_ARGS ?=

.PHONY: setup demo test lint dryrun sandbox-deps

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV) || { \
	  echo "python3 -m venv failed: installing Debian's python3-venv"; \
	  apt-get update -qq && apt-get install -y -qq python3-venv && $(PY) -m venv $(VENV); }
	$(BIN)/python -m pip install -q --upgrade pip
	# CPU torch first, so that nothing below pulls a multi-GB CUDA build.
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[dev]'
	@touch $(STAMP)

setup: $(STAMP)

# the demo's sandbox: bubblewrap and tmux from Debian (installed here when missing and root)
sandbox-deps:
	@command -v bwrap >/dev/null && command -v tmux >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get install -y -qq bubblewrap tmux || { apt-get update -qq && apt-get install -y -qq bubblewrap tmux; }; \
	  else echo "the demo's sandbox needs bubblewrap and tmux: sudo apt-get install bubblewrap tmux" >&2; exit 1; fi; }

demo: setup sandbox-deps
	$(BIN)/python -m horizon.demo --configfile $(DEMO_CONFIG) --cores $(CORES)

test: setup
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: setup
	$(BIN)/ruff check src tests bench workflow/scripts
	$(BIN)/ruff format --check src tests bench workflow/scripts

# The paper grid, as a Slurm user would see it (nothing runs).
dryrun: setup
	$(BIN)/snakemake --profile slurm -n -q rules
