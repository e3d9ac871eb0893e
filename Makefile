# depthbench — `make demo` (the main job), `make setup` (environment), `make test` (setup + the test suite), `make docs` (the site).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PYTEST_ARGS ?=
# the suite runs on one pytest-xdist worker per core (at most 4: a worker's processes peak at ~2.6 GB); a test file stays
# on one worker (its module fixtures -- a Slurm cluster, a trained run -- are built once). TEST_WORKERS=0: in-process
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); echo $$(( n < 4 ? n : 4 )))

.PHONY: setup demo test test-fast test-timm-all clean-venv

## setup: create/update .venv with the pinned stack; builds mmcv's ops once and caches the wheel
setup:
	@DEPTHBENCH_VENV=$(abspath $(VENV)) $(PYTHON) tools/setup_env.py

## demo: setup (a no-op when done), then the main job on the bundled data: reduced-scale HO-ResNet/StepsNet
## comparisons, pretraining + fine-tuning, the papers' tables and the HTML report (DEMO_ARGS=--quick: minutes)
DEMO_ARGS ?=
demo: setup
	@$(VENV)/bin/python -m harness.cli demo $(DEMO_ARGS)

## test: setup (a no-op when done), then the whole test suite
test: setup
	@$(VENV)/bin/python -m pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

## test-fast: setup, then the unit and integration tests that are not slow (tests/tiers.py: no Slurm cluster, no
## claims, floors, setup or GPU check, none that cost 1.0 CPU-s or more when measured); `make test` runs them all
test-fast: setup
	@$(VENV)/bin/python -m pytest -n $(TEST_WORKERS) --dist loadfile -m "not system and not slow" $(PYTEST_ARGS)

## test-timm-all: timm's own model tests (its tests/test_models.py, unchanged) on every registered paper model;
## `make test` runs them on one model per family (DEPTHBENCH_TIMM_MODELS=names picks others). Without timm's
## per-test time limits (set for its CI hardware): the 100M-parameter and 108-layer models take minutes per test
test-timm-all: setup
	@DEPTHBENCH_TIMM_MODELS=all $(VENV)/bin/python -m pytest -n $(TEST_WORKERS) -p no:timeout tests/models/timm_contract $(PYTEST_ARGS)

## clean-venv: remove .venv (the cached mmcv wheel in ~/.cache/depthbench stays)
clean-venv:
	rm -rf $(VENV)

## gpu-check: the GPU check (tools/gpu_check.sh: pytest on the tests with the device marker, tests/devices.py,
## docs/preflight.md) into GPU_CHECK_OUT: meant for a GPU machine, in two calls of under 7 minutes (--call 1, then
## GPU_CHECK_ARGS="--call 2"); here, its CPU variants at tiny sizes:
## make gpu-check GPU_CHECK_PYTHON=.venv/bin/python GPU_CHECK_ARGS="--device cpu"
GPU_CHECK_OUT ?= gpu-check
GPU_CHECK_ARGS ?= --call 1
GPU_CHECK_PYTHON ?= python3
.PHONY: gpu-check
gpu-check:
	@PYTHON=$(GPU_CHECK_PYTHON) bash tools/gpu_check.sh $(GPU_CHECK_OUT) $(GPU_CHECK_ARGS)

## test-random: setup, then the whole suite in a shuffled order (pytest-randomly: the files, and the tests inside each
## file); the seed is printed first and `make test-random SEED=N` runs that order again. `make test` keeps the order
SEED ?=
.PHONY: test-random
test-random: setup
	@seed=$(or $(SEED),$$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')); \
	echo "make test-random: seed $$seed (the same order again: make test-random SEED=$$seed)"; \
	$(VENV)/bin/python -m pytest -p randomly --randomly-seed=$$seed \
	    -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# pytest-randomly, once installed, shuffles every pytest run that loads it; these targets keep the files' order
test test-fast test-timm-all: export PYTEST_ADDOPTS := -p no:randomly $(PYTEST_ADDOPTS)

## docs: setup, then the documentation site (mkdocs.yml, docs/) served on http://127.0.0.1:8000, rebuilt on each
## edit; the configuration and CLI references are generated from the code (tools/docs_reference.py).
## make docs-build: the same site into site/, --strict (a broken link or page fails it, as in tests/test_docs.py)
DOCS_ADDR ?= 127.0.0.1:8000
.PHONY: docs docs-build lint lint-fix
docs: setup
	@$(VENV)/bin/mkdocs serve -a $(DOCS_ADDR)

docs-build: setup
	@$(VENV)/bin/mkdocs build --strict

## lint: ruff's format and rules of pyproject.toml on the whole tree (tests/test_lint.py); lint-fix: tools/ruff_fix.sh
lint: setup
	@$(VENV)/bin/ruff format --check . && $(VENV)/bin/ruff check .

lint-fix: setup
	@RUFF=$(VENV)/bin/ruff bash tools/ruff_fix.sh
