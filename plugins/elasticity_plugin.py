"""Airflow plugin: a page per elastic job in the Airflow UI (and its JSON API).

Registered through Airflow 3's plugin mechanism: a FastAPI app mounted at
/elasticity, and a navigation entry. Thin: the views live in elasticity.airflow.ui.
"""

from airflow.plugins_manager import AirflowPlugin

from elasticity.airflow.hooks import job_configs
from elasticity.airflow.ui import make_app

_jobs = sorted(job_configs())


class ElasticityPlugin(AirflowPlugin):
    name = "elasticity"
    fastapi_apps = [{"app": make_app(), "url_prefix": "/elasticity", "name": "Elastic jobs"}]
    external_views = [
        {"name": f"Elastic job {job}", "href": f"elasticity/jobs/{job}", "destination": "nav", "category": "browse", "url_route": f"elastic_{job}"}
        for job in _jobs
    ]
