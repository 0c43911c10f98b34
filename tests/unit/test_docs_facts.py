"""Facts a newcomer reads before running anything, held to what the project's files say: the connections
`docker-compose.yaml` sets, the versions the pins allow, and one figure for `make unit` on every page."""

from __future__ import annotations

import re
import tomllib

from tests.support.library import REPO

DEPLOY = (REPO / "docs" / "operating" / "deploy.md").read_text()
COMPOSE = (REPO / "docker-compose.yaml").read_text()
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def _row(table_key: str) -> list[str]:
    """The cells of deploy.md's table row whose first cell is `table_key` (in backticks), without their backticks."""
    for line in DEPLOY.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] in (f"`{table_key}`", table_key):
            return [c.strip("`") for c in cells]
    raise AssertionError(f"deploy.md has no row {table_key!r}")


def _pin(requirement: str, extra: str | None = None) -> str:
    """The version specifier pyproject gives a distribution (in `extra`'s list, or the core's)."""
    deps = PYPROJECT["optional-dependencies"][extra] if extra else PYPROJECT["dependencies"]
    return next(d.removeprefix(requirement) for d in deps if re.match(rf"{re.escape(requirement)}[<>=]", d))


def test_the_connections_table_is_what_compose_sets():
    for conn in ("kafka_default", "elasticity_store", "spark_default"):
        compose = re.search(rf"AIRFLOW_CONN_{conn.upper()}: '?(.+?)'?$", COMPOSE, re.M)
        assert compose, conn
        assert _row(conn)[1] == compose.group(1).replace("${POSTGRES_PASSWORD}", "<password>")


def test_the_versions_are_the_pins():
    assert PYPROJECT["requires-python"] == ">=3.11" and _row("Python")[1].startswith("3.11 or newer")
    assert _pin("apache-airflow", "airflow") == ">=3.1,<4" and _row("Airflow")[1].startswith("3.1 or newer, below 4")
    assert _pin("pyspark", "spark") == ">=4.0,<5" and _row("Spark")[1].startswith("a Spark 4 Connect server")
    pyspark = re.search(r"^pyspark==(\S+)$", (REPO / "requirements.txt").read_text(), re.M)
    assert pyspark and f"image: apache/spark:{pyspark.group(1)}-python3" in COMPOSE  # "the pyspark pin's" version


def test_make_unit_takes_the_same_time_on_every_page():
    said = {}
    for page in ("README.md", "docs/getting-started.md"):
        text = " ".join((REPO / page).read_text().split())
        found = re.search(r"`make unit` runs `tests/unit` alone \([^)]*\) in ([^.;]+?) on two cores", text)
        assert found, page
        said[page] = found.group(1)
    assert len(set(said.values())) == 1, said
