"""The job page's Airflow plugin (elasticity.airflow.plugin), for an Airflow whose elasticity is importable
without its distribution's entry points (on PYTHONPATH, say). An installed elasticity registers the plugin
itself (`airflow.plugins` entry point): this file then defines nothing, so Airflow meets the plugin once."""

from elasticity.airflow.plugin import registered_by_entry_point

if not registered_by_entry_point():
    from elasticity.airflow.plugin import ElasticityPlugin

    __all__ = ["ElasticityPlugin"]
