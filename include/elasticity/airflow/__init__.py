"""Airflow glue (hooks and task bodies); the DAG files in dags/ stay thin.
Like spark/, an adapter: the domain core never imports it."""
