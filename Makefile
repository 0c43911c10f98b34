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

# Debian packages the tests use: headless Chromium (the UI browser test) and docker-compose 1.29
# (validates docker-compose.yaml; no engine runs here). Installed only when missing.
SYSTEM_STAMP := $(VENV)/.system-deps

$(SYSTEM_STAMP):
	@command -v chromium >/dev/null && command -v docker-compose >/dev/null || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium docker-compose >/dev/null; }
	@mkdir -p $(VENV) && touch $(SYSTEM_STAMP)

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check -r requirements.txt -e .
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/elasticity demo

# The Airflow UI over the demo's runs (Ctrl-C stops it).
ui: $(STAMP)
	AIRFLOW_HOME=$(ELASTICITY_HOME)/airflow AIRFLOW__CORE__DAGS_FOLDER=$(CURDIR)/dags AIRFLOW__CORE__PLUGINS_FOLDER=$(CURDIR)/plugins \
	AIRFLOW__CORE__LOAD_EXAMPLES=False AIRFLOW__CORE__EXECUTION_API_SERVER_URL=http://127.0.0.1:8080/execution/ \
	AIRFLOW__CORE__PARALLELISM=4 AIRFLOW__API__BASE_URL=http://127.0.0.1:8080 $(BIN)/airflow standalone

lint: $(STAMP)
	$(BIN)/ruff check .

test: lint $(SYSTEM_STAMP)
	$(BIN)/pytest

clean:
	-$(BIN)/elasticity broker stop
	rm -rf $(VENV) .elasticity
