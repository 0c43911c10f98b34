"""Names users choose that become paths, topic names, DAG ids and transactional ids: one rule each, checked
at config check, so that no name can climb out of its folder (`../x`, `/abs`) or fail only at the first
exactly-once commit.

- a job name is a DAG id part, a folder under ELASTICITY_HOME and a blob prefix: Airflow's DAG id characters,
  starting with a letter or digit (so never `.` or `..`), at most 200 long;
- a stream name is a Kafka topic: Kafka's rule (letters, digits, `.`, `_`, `-`, at most 249, not `.` or `..`);
- a job id joins the job name in the commit topic (`__elasticity_commits_<job>_<id>`) and transactional ids:
  the job name's rule, the commit topic within Kafka's 249;
- a Parquet output's name is one folder under `job.output.path`: the job name's rule;
- a run name (an Airflow run id, a data-quality run's name) becomes one path segment: `path_part`.
"""

from __future__ import annotations

import re

JOB_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
JOB_NAME_ALLOWED = "letters, digits, '.', '_' and '-', starting with a letter or digit, at most 200"
TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")
TOPIC_ALLOWED = "a Kafka topic name: letters, digits, '.', '_' and '-', at most 249, not '.' or '..'"
TOPIC_MAX = 249


def is_job_name(name: str) -> bool:
    return JOB_NAME.fullmatch(name) is not None


def is_topic(name: str) -> bool:
    return TOPIC.fullmatch(name) is not None and name not in (".", "..")


def commit_topic(job: str, job_id: str) -> str:
    """A job's commit records, named as Samza names its checkpoint topic (`__samza_checkpoint_ver_1_for_<job>_<id>`)."""
    return f"__elasticity_commits_{job}_{job_id}"


def path_part(name: str) -> str:
    """`name` as one path segment of its own: other characters become `_`, and a name of dots only is prefixed
    with `_`, so that `..` can never stand for the folder above."""
    part = "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "_"
    return f"_{part}" if set(part) == {"."} else part
