# The README's two commands: `make demo` and `make test`. Each creates .venv and
# installs what is missing (a stamp file makes the second run instant).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export ELASTICITY_HOME ?= $(CURDIR)/.elasticity
export PYSPARK_PYTHON := $(CURDIR)/$(BIN)/python
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: setup demo ui test lint clean

setup: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check -r requirements.txt -e .
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/elasticity demo

# The Airflow UI over the demo's runs (Ctrl-C stops it).
ui: $(STAMP)
	AIRFLOW_HOME=$(ELASTICITY_HOME)/airflow AIRFLOW__CORE__DAGS_FOLDER=$(CURDIR)/dags AIRFLOW__CORE__LOAD_EXAMPLES=False \
	AIRFLOW__CORE__PARALLELISM=4 AIRFLOW__API__BASE_URL=http://127.0.0.1:8080 $(BIN)/airflow standalone

lint: $(STAMP)
	$(BIN)/ruff check .

test: lint
	$(BIN)/pytest

clean:
	-$(BIN)/elasticity broker stop
	rm -rf $(VENV) .elasticity
