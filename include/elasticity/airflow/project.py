"""Where the user's Airflow project is: its `dags/`, `plugins/` and job configs.

They belong to the project, not to the installed library, so they are found from
what the user says (ELASTICITY_JOBS_DIR, ELASTICITY_PROJECT_DIR) or from the
current directory, never from where this file is installed. A folder that is not
there is an error naming the variable to set. The project's root holds its apps
(`app.class=<module>:build`), which `importable` puts on the Python path. Imports no Airflow.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

JOBS_ENV = "ELASTICITY_JOBS_DIR"
PROJECT_ENV = "ELASTICITY_PROJECT_DIR"


class ProjectError(ValueError):
    """A folder of the user's project is missing; the message says what to set."""


def project_dir() -> Path:
    """ELASTICITY_PROJECT_DIR, else the current directory (`make airflow` runs in the checkout)."""
    return Path(os.environ.get(PROJECT_ENV) or Path.cwd()).resolve()


def _where() -> str:
    return f"{PROJECT_ENV}={os.environ[PROJECT_ENV]}" if os.environ.get(PROJECT_ENV) else "the current directory"


def jobs_dir() -> Path:
    """The folder of the jobs' `.properties` files: ELASTICITY_JOBS_DIR, else `include/jobs` of the project."""
    if os.environ.get(JOBS_ENV):
        folder = Path(os.environ[JOBS_ENV]).resolve()
        if not folder.is_dir():
            raise ProjectError(
                f"{JOBS_ENV}={os.environ[JOBS_ENV]} is not a folder; point it at the folder of your job configs (.properties)"
            )
        return folder
    folder = project_dir() / "include" / "jobs"
    if not folder.is_dir():
        raise ProjectError(
            f"no job configs folder: {folder} does not exist (project: {_where()}); "
            f"set {JOBS_ENV} to the folder of your job configs (.properties), or run from the project folder"
        )
    return folder


def airflow_folders() -> tuple[Path, Path]:
    """The project's `dags/` and `plugins/`, which `elasticity airflow` points Airflow at."""
    project = project_dir()
    missing = [name for name in ("dags", "plugins") if not (project / name).is_dir()]
    if missing:
        raise ProjectError(
            f"no Airflow project at {project} ({_where()}): {' and '.join(f'{m}/' for m in missing)} not found; "
            f"run from the project folder (the one holding dags/, plugins/ and include/jobs) or set {PROJECT_ENV}"
        )
    return project / "dags", project / "plugins"


def importable() -> Path:
    """Put the project's root on this process's path and on PYTHONPATH, which what it starts inherits (a local
    Spark's Python workers, the embedded Spark Connect server, Airflow's processes): the apps there load by
    name wherever the job runs on this machine. Appended, so a project's file shadows no installed module."""
    root = project_dir()
    if str(root) not in sys.path:
        sys.path.append(str(root))
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(root) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([*paths, str(root)])
    return root
