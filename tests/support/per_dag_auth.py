"""An auth manager for the job page's tests: Airflow's SimpleAuthManager, except that one user may not touch the
DAGs whose ids match a pattern (SimpleAuthManager's roles cannot deny a viewer one DAG). Airflow loads it by
`AIRFLOW__CORE__AUTH_MANAGER=tests.support.per_dag_auth.PerDagAuthManager`; the user and the pattern come from
ELASTICITY_TEST_DENIED_USER and ELASTICITY_TEST_DENIED_DAGS (a regular expression matching whole DAG ids)."""

from __future__ import annotations

import os
import re

from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager

DENIED_USER = "ELASTICITY_TEST_DENIED_USER"
DENIED_DAGS = "ELASTICITY_TEST_DENIED_DAGS"


class PerDagAuthManager(SimpleAuthManager):
    def is_authorized_dag(self, *, method, user, access_entity=None, details=None) -> bool:
        """Refused for the denied user on a matching DAG, whatever the method; else as SimpleAuthManager says."""
        dag_id = details.id if details else None
        if (
            dag_id
            and user.get_name() == os.environ.get(DENIED_USER)
            and re.fullmatch(os.environ.get(DENIED_DAGS, "(?!)"), dag_id)
        ):
            return False
        return super().is_authorized_dag(method=method, user=user, access_entity=access_entity, details=details)
