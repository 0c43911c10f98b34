"""Airflow plugin: a page per elastic job in the Airflow UI (and its JSON API).

Registered through Airflow 3's plugin mechanism: a FastAPI app mounted at
/elasticity, and a navigation entry. Thin: the views live in elasticity.airflow.ui.

Every task process loads plugins too; the app (FastAPI, Airflow's auth, the
report code) is built only when the API server asks for it, so a micro-batch
task does not pay seconds of imports to start and to end.
"""

import logging
from functools import cache

from airflow.plugins_manager import AirflowPlugin

from elasticity.airflow.hooks import job_configs
from elasticity.airflow.project import ProjectError


class _BuiltOnFirstUse:
    @cache  # noqa: B019 (one app per process, for the life of the process)
    def __get__(self, obj, owner) -> list[dict]:
        from elasticity.airflow.ui import make_app

        return [{"app": make_app(), "url_prefix": "/elasticity", "name": "Elastic jobs"}]


def _jobs() -> list[str]:
    """The jobs of the navigation; without a jobs folder the page still loads (the DAG files say what to set)."""
    try:
        return sorted(job_configs())
    except ProjectError as e:
        logging.getLogger(__name__).warning("no elastic job pages: %s", e)
        return []


class ElasticityPlugin(AirflowPlugin):
    name = "elasticity"
    fastapi_apps = _BuiltOnFirstUse()
    external_views = [
        {
            "name": f"Elastic job {job}",
            "href": f"elasticity/jobs/{job}",
            "destination": "nav",
            "category": "browse",
            "url_route": f"elastic_{job}",
        }
        for job in _jobs()
    ]
