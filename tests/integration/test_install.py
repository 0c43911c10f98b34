"""A non-editable install works: a wheel of the project in a fresh venv with nothing but its declared
dependencies (from the package index), run from a folder outside the checkout, with no PYTHONPATH.
The core's `dependencies` must be enough for the CLI's commands that need no service, the package
data (the spark-submit entry file, log4j2.properties) must be in the wheel, and a command of an
extra must say which extra to install."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.unit.test_grouping import SAMZA71_MAX

EXAMPLE = REPO / "include" / "jobs" / "examples" / "samza71-max.properties"
JOB_MODEL = ["job-model", "--config", str(EXAMPLE), "--partitions", "kafka.IS1=4", "kafka.IS2=8", "--format", "table"]


def _run(args: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    """With the environment of a fresh shell: no PYTHONPATH, no project variable, no virtualenv of ours."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ELASTICITY_", "AIRFLOW", "PYSPARK", "KAFKA_")) and k not in ("PYTHONPATH", "VIRTUAL_ENV")
    }
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _ok(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 0, f"{' '.join(done.args)} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path, dict[str, float]]:
    """(the venv, a folder outside the checkout, seconds per step)."""
    tmp = tmp_path_factory.mktemp("install")
    took: dict[str, float] = {}
    start = time.monotonic()
    # the tree as it is (committed or not, minus what git ignores), so the build writes nothing into the checkout
    listed = _ok(_run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], REPO)).split("\0")
    source = tmp / "source"
    for name in filter(None, listed):
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            (source / name).write_bytes((REPO / name).read_bytes())
    _ok(_run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp / "dist"), str(source)], tmp))
    (wheel,) = (tmp / "dist").glob("elasticity-*.whl")
    took["build the wheel"] = time.monotonic() - start
    start = time.monotonic()
    venv = tmp / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    _ok(_run([base, "-m", "venv", "--without-pip", str(venv)], tmp))  # this pip installs into it: no ensurepip
    _ok(_run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q", str(wheel)], tmp))
    took["venv and install with the declared dependencies"] = time.monotonic() - start
    outside = tmp / "elsewhere"
    outside.mkdir()
    return venv, outside, took


def test_the_wheel_runs_the_cli_with_only_its_declared_dependencies(installed):
    venv, outside, took = installed
    start = time.monotonic()
    where = _ok(_run([str(venv / "bin" / "python"), "-c", "import elasticity; print(elasticity.__file__)"], outside)).strip()
    package = Path(where).parent
    assert package.is_relative_to(venv), where  # the installed copy, not the checkout
    assert (package / "spark" / "log4j2.properties").is_file() and (package / "__main__.py").is_file()
    _ok(_run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "check"], outside))

    assert "job-model" in _ok(_run([str(venv / "bin" / "elasticity"), "--help"], outside))
    expected = SAMZA71_MAX.strip().replace(" - StreamTask:", " - Partition ")
    assert _ok(_run([str(venv / "bin" / "elasticity"), *JOB_MODEL], outside)).strip() == expected
    # spark-submit runs the package's entry file as a file: its folder must not shadow kafka-python
    assert _ok(_run([str(venv / "bin" / "python"), str(package / "__main__.py"), *JOB_MODEL], outside)).strip() == expected
    assert _ok(_run([str(venv / "bin" / "python"), "-m", "elasticity", *JOB_MODEL], outside)).strip() == expected

    demo = _run([str(venv / "bin" / "elasticity"), "demo"], outside)
    assert demo.returncode == 2 and "pip install 'elasticity[airflow]'" in demo.stderr, demo.stderr
    took["run the commands"] = time.monotonic() - start
    print("install test: " + ", ".join(f"{step} {s:.1f} s" for step, s in took.items()) + f"; total {sum(took.values()):.1f} s")
