"""`elasticity init`'s writer: the files of a new project, a folder in use refused, a job config that loads
strictly without a warning, the thin Airflow files the same as this project's, and the project found where
`elasticity airflow` and `run-batch` look (the current directory)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from elasticity.airflow.project import airflow_folders, jobs_dir
from elasticity.cli import main
from elasticity.config import load_config
from elasticity.scaffold import ScaffoldError, init_project
from tests.support.library import REPO


def test_writes_a_project(tmp_path: Path):
    root = tmp_path / "shop"
    written = init_project(root, "click-stream")
    assert sorted(str(p.relative_to(root)) for p in written) == [
        ".gitignore",
        "README.md",
        "click_stream_app.py",
        "dags/elastic_autosize.py",
        "dags/elastic_data_quality.py",
        "dags/elastic_jobs_check.py",
        "dags/elastic_maintenance.py",
        "dags/elastic_microbatch.py",
        "dags/elastic_replay.py",
        "dags/elastic_rescale.py",
        "dags/elastic_scale_schedule.py",
        "include/jobs/click-stream.properties",
        "plugins/elasticity_plugin.py",
        "pyproject.toml",
        "tests/test_click_stream_app.py",
    ]
    for path in written:
        assert "${" not in path.read_text(), path
        if path.suffix == ".py":
            compile(path.read_text(), str(path), "exec")


def test_the_thin_airflow_files_are_this_projects(tmp_path: Path):
    init_project(tmp_path)
    for folder in ("dags", "plugins"):
        ours = {p.name: p.read_text() for p in (REPO / folder).glob("*.py")}
        assert {p.name: p.read_text() for p in (tmp_path / folder).glob("*.py")} == ours


def test_the_job_config_loads_strictly_without_a_warning(tmp_path: Path):
    init_project(tmp_path, "orders")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        config = load_config(tmp_path / "include" / "jobs" / "orders.properties", strict=True)
    assert config.job_name == "orders"
    assert [str(s) for s in config.inputs] == ["kafka.orders"]
    assert config.app_class == "orders_app:build"
    assert config.offset_default("kafka") == "oldest"
    assert "systems.kafka.default.stream.samza.offset.default" in config.raw_map


def test_refuses_a_folder_in_use(tmp_path: Path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ScaffoldError, match=f"{tmp_path} is not empty"):
        init_project(tmp_path)
    assert main(["init", str(tmp_path)]) == 2
    assert f"error: {tmp_path} is not empty" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_refuses_a_job_name_that_is_no_module(tmp_path: Path):
    with pytest.raises(ScaffoldError, match="--job '1orders'"):
        init_project(tmp_path / "new", "1orders")
    assert not (tmp_path / "new").exists()


def test_found_from_its_folder(tmp_path: Path, monkeypatch):
    assert main(["init", str(tmp_path / "shop")]) == 0
    monkeypatch.chdir(tmp_path / "shop")
    monkeypatch.delenv("ELASTICITY_PROJECT_DIR", raising=False)
    monkeypatch.delenv("ELASTICITY_JOBS_DIR", raising=False)
    assert airflow_folders() == (tmp_path / "shop" / "dags", tmp_path / "shop" / "plugins")
    assert [p.name for p in jobs_dir().glob("*.properties")] == ["orders.properties"]


def test_an_avro_project_loads_strictly_and_passes_its_own_test(tmp_path: Path):
    """`--format avro`: the orders as Avro records of a registry (the in-memory one until the user names
    theirs), the output typed; its config loads strictly and the generated app test passes as generated."""
    import subprocess
    import sys

    root = tmp_path / "shop"
    assert main(["init", str(root), "--job", "orders", "--format", "avro"]) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        config = load_config(root / "include" / "jobs" / "orders.properties", strict=True)
    serde = config.serde("kafka", "msg")
    assert getattr(serde, "format", None) == "avro" and config.output_schema("big_orders") is not None
    env = {**__import__("os").environ, "PYTHONPATH": f"{root}:{REPO / 'include'}", "ELASTICITY_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout + done.stderr
    with pytest.raises(ScaffoldError, match="--format 'xml': expected one of json, avro"):
        init_project(tmp_path / "other", format="xml")
