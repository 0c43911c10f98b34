"""The host name Airflow records for a process (`[core] hostname_callable`): what a task instance shows as the
worker that ran it, and where the API server fetches that attempt's log from (`http://<hostname>:<worker log
server port>/log/...`). A worker of the Celery topology is told its host's address (ELASTICITY_WORKER_HOSTNAME,
set by `elasticity airflow --executor celery` per worker host), which the API server reaches without any name
resolution; elsewhere it is the machine's fully qualified name, Airflow's own default. Imports no Airflow."""

from __future__ import annotations

import os
import socket

HOSTNAME_ENV = "ELASTICITY_WORKER_HOSTNAME"
CALLABLE = "elasticity.airflow.worker_host.hostname"  # the value of AIRFLOW__CORE__HOSTNAME_CALLABLE


def hostname() -> str:
    return os.environ.get(HOSTNAME_ENV) or socket.getfqdn()
