"""Airflow plugin: a page per elastic job in the Airflow UI (and its JSON API).

Registered through Airflow 3's plugin mechanism: a FastAPI app mounted at
/elasticity, and a navigation entry. Thin: the views live in elasticity.airflow.ui.

Every task process loads plugins too; the app (FastAPI, Airflow's auth, the
report code) is built only when the API server asks for it, so a micro-batch
task does not pay seconds of imports to start and to end.
"""

from functools import cache

from airflow.plugins_manager import AirflowPlugin

from elasticity.airflow.hooks import job_configs


class _BuiltOnFirstUse:
    @cache  # noqa: B019 (one app per process, for the life of the process)
    def __get__(self, obj, owner) -> list[dict]:
        from elasticity.airflow.ui import make_app

        return [{"app": make_app(), "url_prefix": "/elasticity", "name": "Elastic jobs"}]


class ElasticityPlugin(AirflowPlugin):
    name = "elasticity"
    fastapi_apps = _BuiltOnFirstUse()
    external_views = [
        {"name": f"Elastic job {job}", "href": f"elasticity/jobs/{job}", "destination": "nav", "category": "browse", "url_route": f"elastic_{job}"}
        for job in sorted(job_configs())
    ]
