# Quick start:  make run   (venv + install + default sweep on an embedded LocalCluster)
#               make test  (venv + install + the test suite)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
ARGS   ?=
PYTEST_ARGS ?=

.PHONY: install run test test-deps bench report clean

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
	$(BIN)/python -m pytest $(PYTEST_ARGS)

report: $(STAMP)
	$(BIN)/python run.py report=true $(ARGS)

bench: $(STAMP)
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b --quick || exit 1; done

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .hypothesis
