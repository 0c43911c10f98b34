"""The job page's Airflow plugin: a page per elastic job in the Airflow UI (and its JSON API).

Registered through Airflow 3's plugin mechanism: a FastAPI app mounted at /elasticity, and a navigation
entry. Airflow finds it in the installed package, so no file need be copied into the plugins folder: the
`airflow.plugins` entry point (loaded by every Airflow) and the provider info's `plugins`
(elasticity.airflow.provider, loaded when `[core] lazy_discover_providers` is off). Airflow registers one
plugin per name, the first it meets (plugins folder, then entry points, then providers), and notes the others
as skipped. Thin: the views live in elasticity.airflow.ui.

Every task process loads plugins too; the app (FastAPI, Airflow's auth, the report code) is built only when
the API server asks for it, so a micro-batch task does not pay seconds of imports to start and to end.
"""

import logging
from functools import cache
from importlib.metadata import entry_points

from airflow.plugins_manager import AirflowPlugin

from elasticity.airflow.hooks import job_configs
from elasticity.airflow.project import ProjectError
from elasticity.airflow.provider import PLUGIN_NAME


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
    name = PLUGIN_NAME
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


ENTRY_POINT = f"{__name__}:{ElasticityPlugin.__name__}"


def registered_by_entry_point() -> bool:
    """Whether the installed distribution registers the plugin itself (its `airflow.plugins` entry point): a
    plugins-folder file then stays out of the way, so Airflow meets the plugin once and notes nothing skipped."""
    return any(ep.value == ENTRY_POINT for ep in entry_points(group="airflow.plugins"))
