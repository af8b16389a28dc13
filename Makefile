# Quick start:  make run   (venv + install + default sweep on an embedded LocalCluster)
#               make test  (venv + install + the test suite)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
ARGS   ?=
PYTEST_ARGS ?=
# Test processes (pytest-xdist): one per core, at most 4. Most tests drive real sweeps in
# subprocesses and wait on them, so 2 cores carry 2 tests at once (serially twice as long;
# a third process gained nothing). TEST_JOBS=0 runs them in this process, one after another.
TEST_JOBS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); echo $$(( n > 4 ? 4 : n )))

.PHONY: install run test test-deps test-slurm bench report clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/python run.py $(ARGS)

# system parts the report tests drive for real (pdflatex + siunitx, Chromium, pdffonts);
# idempotent, and only a notice without root
test-deps:
	@bash scripts/install_report_test_deps.sh

test: $(STAMP) test-deps
	$(BIN)/python -m pytest -m "not slurm" -n $(TEST_JOBS) --dist worksteal $(PYTEST_ARGS)

# A real single-node SLURM on localhost (root; installs slurm-wlm and munge), then the
# tests marked slurm: sweeps through the CLI with cluster=slurm (about 6 minutes).
test-slurm: $(STAMP)
	bash tests/cluster/local_slurm.sh
	$(BIN)/python -m pytest -m slurm $(PYTEST_ARGS) tests/test_slurm.py

report: $(STAMP)
	$(BIN)/python run.py report=true $(ARGS)

bench: $(STAMP)
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b --quick || exit 1; done

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .hypothesis
