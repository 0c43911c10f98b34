"""The jobs folder's check (no DAG of its own): a job config that does not load (not UTF-8, a line that is
not key=value, a bad value, no job.name), or two that claim one job.name, is an import error of this file,
naming each file and what is wrong in it. The other DAG files leave those files out and keep every other
job's DAGs, page and API."""

from __future__ import annotations

from elasticity.airflow.hooks import check_jobs_folder

check_jobs_folder()
