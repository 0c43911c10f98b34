# The README's two commands: `make demo` and `make test`. Each creates .venv and
# installs what is missing (a stamp file makes the second run instant).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export ELASTICITY_HOME ?= $(CURDIR)/.elasticity
export PYSPARK_PYTHON := $(CURDIR)/$(BIN)/python
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: setup demo test lint clean

setup: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check -r requirements.txt -e .
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/elasticity broker start
	$(BIN)/elasticity feed --config include/jobs/demo.properties --records 5000 --keys 100 --partitions 4
	$(BIN)/elasticity job-model --config include/jobs/demo.properties

lint: $(STAMP)
	$(BIN)/ruff check .

test: lint
	$(BIN)/pytest

clean:
	-$(BIN)/elasticity broker stop
	rm -rf $(VENV) .elasticity
