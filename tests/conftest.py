"""Shared fixtures. Integration fixtures start real components once per session:
the embedded broker (or the Kafka named by KAFKA_BOOTSTRAP_SERVERS)."""

from __future__ import annotations

import os

# gRPC's fork handlers restart its poller in a child forked while a channel is open (a Spark Connect client of an
# earlier test); the child's close of its descriptors before exec closes the poller's epoll and gRPC aborts the
# child (`epoll_wait error: Bad file descriptor`, SIGABRT). pyspark forks the classic session's JVM with a
# `preexec_fn` (a real fork, handlers run): about 2 starts in 100 died so. Read by gRPC at its import: set first.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
# A local Spark driver whose hostname resolves to loopback binds the first non-loopback interface's address; the
# Celery topology's test adds and removes such interfaces (its hosts' veth pairs) while the other worker's
# modules start sessions, whose driver then failed to bind ("Cannot assign requested address"). Every JVM of
# the suite binds loopback unless a test gives its own hosts their addresses (the cluster, the topology).
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

import contextlib
import random
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

# `ci` (CI=true) runs more examples than a local `make test`; `unit` (`make unit`: pytest --hypothesis-profile=unit)
# fewer, for a quick loop; tests with their own count scale it with tests/support/examples.py.
settings.register_profile("default", deadline=None, max_examples=100)
settings.register_profile("ci", deadline=None, max_examples=200)
settings.register_profile("unit", deadline=None, max_examples=10)
settings.load_profile("ci" if os.environ.get("CI") else "default")

REPO = Path(__file__).resolve().parents[1]

# Airflow reads its configuration when first imported: point it at a private,
# throw-away home (SQLite) before any test module imports it; one per pytest-xdist worker (`make test` runs two),
# which inherit the home their controller made, unless the caller set its own.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
if "AIRFLOW_HOME" not in os.environ or os.environ.get("ELASTICITY_TESTS_AIRFLOW_HOME_OF", _WORKER) != _WORKER:
    os.environ["AIRFLOW_HOME"] = tempfile.mkdtemp(prefix=f"elasticity-airflow-{_WORKER}")
    os.environ["ELASTICITY_TESTS_AIRFLOW_HOME_OF"] = _WORKER
os.environ["AIRFLOW__CORE__LOAD_EXAMPLES"] = "False"
os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(REPO / "dags")
os.environ.setdefault("ELASTICITY_PROJECT_DIR", str(REPO))  # this checkout is the Airflow project, wherever pytest runs
os.environ.setdefault("AIRFLOW__CORE__PARALLELISM", "4")
os.environ.setdefault("AIRFLOW_CONN_SPARK_DEFAULT", '{"conn_type": "spark", "host": "local[2]"}')
os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # spark-submit of the venv
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
# Randomized trials draw new seeds each run, the same ones on every xdist worker (each collects the suite, and
# workers must agree on its test ids): drawn here, in the process that starts them, which they inherit.
os.environ.setdefault("ELASTICITY_TRIALS_BASE_SEED", str(random.SystemRandom().randrange(10**6)))


# Folders under tests/ whose tests need a broker, Spark or the Airflow database: `-m "not integration"` skips them.
INTEGRATION = {"integration", "dags"}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--shuffle-modules",
        type=int,
        metavar="SEED",
        help="run the modules in an order drawn from SEED (each module's tests keep theirs): the suite must not depend on it",
    )


def shuffled_by_module(items: list[pytest.Item], seed: int) -> list[pytest.Item]:
    """`items` with their modules in a random order drawn from `seed`; the same on every xdist worker."""
    modules: dict[Path, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.path, []).append(item)
    order = sorted(modules)
    random.Random(seed).shuffle(order)
    return [item for path in order for item in modules[path]]


def pytest_report_header(config: pytest.Config) -> str | None:
    seed = config.getoption("--shuffle-modules")
    return None if seed is None else f"modules shuffled: --shuffle-modules={seed}"


def longest_first(items: list[pytest.Item], budgets: dict[str, float]) -> list[pytest.Item]:
    """`items` with their modules by budget, longest first: xdist deals modules to workers as they free up in this
    order, so a long module started last cannot leave the other workers idle at the end (LPT scheduling)."""
    modules: dict[Path, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.path, []).append(item)

    def budget(path: Path) -> float:
        return budgets.get(path.relative_to(REPO).as_posix(), DEFAULT_BUDGET_S) if path.is_relative_to(REPO) else 0.0

    order = sorted(modules, key=lambda path: (-budget(path), path))
    return [item for path in order for item in modules[path]]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if (seed := config.getoption("--shuffle-modules")) is not None:
        items[:] = shuffled_by_module(items, seed)
    else:
        items[:] = longest_first(items, module_budgets())
    for item in items:
        if item.path.is_relative_to(REPO / "tests") and item.path.relative_to(REPO / "tests").parts[0] in INTEGRATION:
            item.add_marker(pytest.mark.integration)
    # the cluster's fault tests run by their own target (`make chaos`)
    if "chaos" not in (config.getoption("-m") or "") and (apart := [i for i in items if i.get_closest_marker("chaos")]):
        config.hook.pytest_deselected(items=apart)
        items[:] = [i for i in items if not i.get_closest_marker("chaos")]


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A real Kafka-protocol broker for the session."""
    external = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if external:
        yield external
        return
    from elasticity.local.broker import EmbeddedBroker, free_port

    broker = EmbeddedBroker(tmp_path_factory.mktemp("elasticity-home"))
    state = broker.start(port=free_port())
    try:
        yield state.bootstrap
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def spark_connect_server(tmp_path_factory: pytest.TempPathFactory):
    """The warm engine of the embedded default: a Spark Connect server (local[2]) on a free loopback port,
    its state file under its own ELASTICITY_HOME (`home`)."""
    from types import SimpleNamespace

    from elasticity.local.connect_server import SparkConnectServer
    from elasticity.local.daemon import free_port

    home = tmp_path_factory.mktemp("spark-connect-home")
    server = SparkConnectServer(home)
    state = server.start(port=free_port(), master="local[2]")
    try:
        yield SimpleNamespace(remote=state.remote, home=home)
    finally:
        server.stop()


@pytest.fixture(scope="session")
def spark_connect(spark_connect_server) -> str:
    return spark_connect_server.remote


@pytest.fixture(scope="session")
def airflow_db() -> str:
    """A real Airflow metadata database (SQLite), migrated once per session."""
    subprocess.run([str(Path(sys.executable).parent / "airflow"), "db", "migrate"], check=True, capture_output=True, timeout=300)
    return os.environ["AIRFLOW_HOME"]


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory):
    """A real local SparkSession (local[2]: this machine has 2 cores). Its JVM writes to `jvm.log`, whose tail a
    failed start quotes: the gateway's own error says only that the process exited."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    from elasticity.spark.jvm_options import jvm_options

    conf = (
        SparkConf()
        .setMaster("local[2]")
        .setAppName("elasticity-tests")
        .set("spark.ui.enabled", "false")
        .set("spark.driver.extraJavaOptions", jvm_options())  # as the product's own local sessions
        .set("spark.sql.shuffle.partitions", "4")
        # Python workers can import the test apps (tests/support/apps.py), as a user's workers import theirs
        .set("spark.executorEnv.PYTHONPATH", str(REPO))
    )
    log = tmp_path_factory.mktemp("spark-driver") / "jvm.log"
    with log.open("wb") as out:
        try:
            gateway = launch_gateway(conf, popen_kwargs={"stdout": out, "stderr": out})
        except Exception as e:
            raise RuntimeError(f"the local Spark driver did not start; the end of {log}:\n{log.read_text()[-4000:]}") from e
    session = SparkSession(SparkContext(conf=conf, gateway=gateway))
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="module", autouse=True)
def _environment_kept():
    """A module leaves the process's environment as it found it: the next module on this worker, whichever it is
    (`--dist loadfile` deals modules in a different order each run), starts from the same one."""
    before = dict(os.environ)
    yield
    if dict(os.environ) != before:
        os.environ.clear()
        os.environ.update(before)


@pytest.fixture(scope="module", autouse=True)
def _process_closed():
    """A module leaves no process state behind (the container process and its consumers, parked stores,
    shipped archives): the registry closes after it, as at a process's end."""
    yield
    from elasticity.process_registry import PROCESS

    PROCESS.close()


POSTGRES_ENV = "ELASTICITY_TEST_POSTGRES_URL"


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request, tmp_path) -> str:
    """The same store suite on the embedded SQLite file and on a real PostgreSQL server."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'checkpoints.db'}"
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.skip(
            f"PostgreSQL store tests need {POSTGRES_ENV} (e.g. postgresql+psycopg://postgres@127.0.0.1:5432/test); .ci/run sets it"
        )
    return url


@contextlib.contextmanager
def empty_database(store_url: str, tmp_path: Path, name: str = "empty") -> Iterator[str]:
    """A store URL with no tables yet: a new SQLite file, or a new schema of the PostgreSQL database."""
    if store_url.startswith("sqlite"):
        yield f"sqlite:///{tmp_path / f'{name}.db'}"
        return
    import uuid

    from sqlalchemy import create_engine, text

    schema = f"{name}_{uuid.uuid4().hex[:8]}"
    admin = create_engine(store_url)
    with admin.begin() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    try:
        yield f"{store_url}{'&' if '?' in store_url else '?'}options=-csearch_path%3D{schema}"
    finally:
        with admin.begin() as conn:
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


@pytest.fixture
def empty_store_url(store_url, tmp_path):
    """A store URL with no tables yet: a new SQLite file, or a new schema of the PostgreSQL database."""
    with empty_database(store_url, tmp_path) as url:
        yield url


@pytest.fixture
def job_name(request) -> str:
    """A job name unique per test, so tests can share one PostgreSQL database."""
    import uuid

    from elasticity.config.names import path_part

    return f"{path_part(request.node.name[:40])}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory):
    """A real S3-protocol server (SeaweedFS from its wheel) on a free loopback port."""
    from elasticity.local.s3server import SeaweedS3

    with SeaweedS3(tmp_path_factory.mktemp("seaweedfs")) as server:
        yield server


# Each module's time (set-up, calls and tear-down of its tests), printed at the end of a run beside its budget in
# docs/reference/testing.md: a module over budget is told, never failed (a loaded machine drifts).
BUDGETS = REPO / "docs" / "reference" / "testing.md"
DEFAULT_BUDGET_S = 30.0  # a module the table does not name
_module_seconds: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    module = report.nodeid.split("::", 1)[0]
    _module_seconds[module] = _module_seconds.get(module, 0.0) + report.duration


def module_budgets(page: Path = BUDGETS) -> dict[str, float]:
    """The budget table's rows: | `tests/...py` | seconds | what it proves |."""
    budgets: dict[str, float] = {}
    if not page.exists():
        return budgets
    for line in page.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0].startswith("`tests/") and cells[1].replace(",", "").isdigit():
            budgets[cells[0].strip("`")] = float(cells[1].replace(",", ""))
    return budgets


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    slow = sorted(((s, m) for m, s in _module_seconds.items() if s >= 5.0), reverse=True)
    if not slow:
        return
    budgets = module_budgets()
    terminalreporter.section("seconds per module (budgets: docs/reference/testing.md)")
    for seconds, module in slow:
        budget = budgets.get(module, DEFAULT_BUDGET_S)
        over = "  over budget" if seconds > budget else ""
        terminalreporter.write_line(f"{seconds:8.1f} s of {budget:5.0f}  {module}{over}")
