# The README's two commands: `make demo` and `make test` (and `make unit`, the quick loop). Each creates .venv
# and installs what is missing (a stamp file makes the second run instant).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export ELASTICITY_HOME ?= $(CURDIR)/.elasticity
export PYSPARK_PYTHON := $(CURDIR)/$(BIN)/python
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: setup demo airflow ui stop test unit lint docs soak cluster chaos celery clean bench-quix

setup: $(STAMP)

# Debian packages the tests use: headless Chromium (the UI browser test), docker-compose 1.29
# (validates docker-compose.yaml; no engine runs here) and redis-server (Celery's broker: the Celery topology
# starts one of its own; machines of this kind also run one on 6379), iproute2 (`ip`: the topology's worker
# hosts) and prometheus (the server that scrapes /elasticity/metrics in the metrics test; without its
# recommends, the node exporter and its collectors). Installed only when missing.
SYSTEM_STAMP := $(VENV)/.system-deps

$(SYSTEM_STAMP):
	@command -v chromium >/dev/null && command -v docker-compose >/dev/null && command -v redis-server >/dev/null \
	  && command -v ip >/dev/null && command -v prometheus >/dev/null || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium docker-compose \
	    redis-server iproute2 >/dev/null && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq \
	    --no-install-recommends prometheus >/dev/null; }
	@mkdir -p $(VENV) && touch $(SYSTEM_STAMP)

$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check -r requirements.txt -e .
	touch $(STAMP)

# bench/cpu_bench.py's peer, Quix Streams, in a venv of its own: it pins confluent-kafka below the engine's pin
QUIX_STAMP := $(VENV)/quix/.installed

bench-quix: $(QUIX_STAMP)

$(QUIX_STAMP): bench/requirements-quix.txt
	test -x $(VENV)/quix/bin/python || $(PYTHON) -m venv $(VENV)/quix
	$(VENV)/quix/bin/python -m pip install -q --disable-pip-version-check -r bench/requirements-quix.txt
	touch $(QUIX_STAMP)

demo: $(STAMP)
	$(BIN)/elasticity demo

# Airflow as users run it (scheduler, UI on 127.0.0.1:8080) on the embedded broker and Spark Connect server,
# the demo job running whenever records wait (its lag watcher); Ctrl-C stops Airflow, `make stop` the broker and Spark.
# `make airflow DB=postgres`: Airflow's metadata and the checkpoints on the PostgreSQL server at 127.0.0.1:5432
# (databases elasticity_airflow and elasticity, created when missing) with the LocalExecutor, as in production.
# `make airflow CLUSTER=1`: the jobs run on the local cluster of `make cluster` (its Connect server as
# spark_default, its S3 storage for sinks and blobs, the job configs of include/jobs/cluster).
# `make airflow CELERY=1`: the CeleryExecutor on PostgreSQL, Redis as Celery's broker (127.0.0.1:6379, else one
# of its own), the API server, scheduler, dag-processor, triggerer and WORKERS (2) Celery workers, each on a host
# of its own (a network namespace: run as root); with CLUSTER=1 the jobs' data is on the cluster's S3 storage.
DB ?= sqlite
WORKERS ?= 2
airflow: $(STAMP) $(if $(CELERY),$(SYSTEM_STAMP))
	$(BIN)/elasticity airflow --db $(if $(CELERY),$(if $(filter sqlite,$(DB)),postgres,$(DB)),$(DB)) \
	  $(if $(CELERY),--executor celery --workers $(WORKERS)) $(if $(CLUSTER),--cluster) $(if $(PORT),--port $(PORT))

ui: airflow

stop:
	-$(BIN)/elasticity cluster stop
	-$(BIN)/elasticity spark stop
	-$(BIN)/elasticity broker stop

# The documentation site (mkdocs.yml) into site/, offline; a broken link, a missing page, a page that would load
# a font, script or stylesheet from another host, or a config key without its reference row fails the build.
DOCS_STAMP := $(VENV)/.docs-installed

$(DOCS_STAMP): docs/requirements.txt $(STAMP)
	$(BIN)/python -m pip install -q --disable-pip-version-check -r docs/requirements.txt
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build

# ruff's lint rules and its format, and mypy over include/ (pyproject.toml's [tool.mypy])
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# TEST_WORKERS: pytest-xdist workers (docs/reference/testing.md says why this many on 2 cores). The modules go to
# the workers in the order tests/conftest.py collects them, longest first (--no-loadscope-reorder: not xdist's
# most-tests-first, which left the long modules of few tests to the end).
TEST_WORKERS ?= 3
test: lint $(SYSTEM_STAMP)
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(if $(SHUFFLE),--shuffle-modules=$(SHUFFLE))

# tests/unit alone (no broker, Spark, Airflow database or network; no system packages, no lint), with a
# tenth of the property-test examples of `make test` (the `unit` hypothesis profile): seconds, not minutes.
unit: $(STAMP)
	$(BIN)/pytest --hypothesis-profile=unit tests/unit

# The fault-injection soak through Airflow's scheduler on loopback (its own broker, Spark Connect server,
# private PostgreSQL store and airflow standalone, in a temporary folder): `make soak MINUTES=30`.
# `make soak CLUSTER=1 MINUTES=60`: on the local cluster under its supervisor, Airflow on PostgreSQL with the
# LocalExecutor, a fault every 1 to 3 minutes (executor, worker, driver, master, batch task, broker, store).
MINUTES ?= 30
soak: $(STAMP)
	$(BIN)/python bench/soak.py --minutes $(MINUTES) $(if $(CLUSTER),--cluster)

# A Spark standalone master and two workers on this machine (each its own work dir and ELASTICITY_HOME), the
# S3-protocol server they share and a Spark Connect server attached: prints what a job sets to run there.
cluster: $(STAMP)
	$(BIN)/elasticity cluster start

# The fault tests on a two-worker cluster: a worker, the Connect server, the master killed mid-run and started
# again, a worker cut off from the network for 30 s (its own network namespace; needs root and `ip`); each
# prints how long healing took.
chaos: $(STAMP)
	$(BIN)/pytest -m chaos -s tests/chaos

# Airflow's CeleryExecutor on this machine (two workers, each its own network namespace; needs root and `ip`)
# through a worker killed, one paused past the heartbeat timeout, Redis and the API server restarted.
celery: $(SYSTEM_STAMP)
	$(BIN)/pytest -m celery -s tests/integration/test_celery.py

clean: stop
	rm -rf $(VENV) .elasticity
