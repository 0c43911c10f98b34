"""The user's project (dags/, plugins/, job configs) is found from what the user says or the current
directory, never from where the library is installed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from elasticity.airflow.project import JOBS_ENV, PROJECT_ENV, ProjectError, airflow_folders, jobs_dir

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def bare(monkeypatch, tmp_path) -> Path:
    """A current directory with nothing in it, and no variable set."""
    monkeypatch.delenv(JOBS_ENV, raising=False)
    monkeypatch.delenv(PROJECT_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_jobs_come_from_the_variable_else_the_current_directory(bare, monkeypatch):
    (bare / "include" / "jobs").mkdir(parents=True)
    assert jobs_dir() == (bare / "include" / "jobs").resolve()
    (bare / "mine").mkdir()
    monkeypatch.setenv(JOBS_ENV, str(bare / "mine"))
    assert jobs_dir() == (bare / "mine").resolve()
    monkeypatch.delenv(JOBS_ENV)
    monkeypatch.setenv(PROJECT_ENV, str(REPO))
    assert jobs_dir() == REPO / "include" / "jobs"


def test_a_missing_folder_names_what_to_set(bare, monkeypatch):
    with pytest.raises(ProjectError, match=rf"{bare / 'include' / 'jobs'} does not exist .*set {JOBS_ENV}"):
        jobs_dir()
    monkeypatch.setenv(JOBS_ENV, str(bare / "nowhere"))
    with pytest.raises(ProjectError, match=rf"{JOBS_ENV}=.*nowhere is not a folder"):
        jobs_dir()
    with pytest.raises(ProjectError, match=rf"dags/ and plugins/ not found; .*or set {PROJECT_ENV}"):
        airflow_folders()
    monkeypatch.setenv(PROJECT_ENV, str(REPO))
    assert airflow_folders() == (REPO / "dags", REPO / "plugins")


def test_the_library_never_walks_out_of_its_install():
    """`Path(__file__).parents[n]` may reach the folder that holds the package (site-packages), never above."""
    package = REPO / "include"
    above = []
    for path in (package / "elasticity").rglob("*.py"):
        depth = len(path.relative_to(package).parts) - 1  # parents[depth - 1] is the package, [depth] its folder
        for n in re.findall(r"parents\[(\d+)\]", path.read_text()):
            if int(n) > depth:
                above.append(f"{path.relative_to(REPO)}: parents[{n}]")
    assert above == []
