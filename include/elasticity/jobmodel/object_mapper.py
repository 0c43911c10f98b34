"""JSON serde following Samza's SamzaObjectMapper conventions.

Field names are dashed (`task-name`, `system-stream-partitions`, ...). An SSP
object always carries `keyBucket` (as SamzaObjectMapper writes it) and is read
with or without it; an SSP map key has 3 parts unless it has a bucket (as Samza
writes it) and is read with 3 or 4, so what a Samza version without keyBuckets
wrote still loads, and what we write loads in Samza.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from elasticity.jobmodel.model import (
    NO_KEY_BUCKET,
    ContainerModel,
    JobModel,
    SystemStreamPartition,
    TaskMode,
    TaskModel,
    TaskName,
)


class SerdeError(ValueError):
    pass


# --- SystemStreamPartition -------------------------------------------------


def ssp_to_dict(ssp: SystemStreamPartition) -> dict[str, Any]:
    return {"system": ssp.system, "stream": ssp.stream, "partition": ssp.partition, "keyBucket": ssp.key_bucket}


def ssp_from_dict(d: dict[str, Any]) -> SystemStreamPartition:
    try:
        return SystemStreamPartition(
            str(d["system"]), str(d["stream"]), int(d["partition"]), int(d.get("keyBucket", NO_KEY_BUCKET))
        )
    except (KeyError, TypeError, ValueError) as e:
        raise SerdeError(f"not a SystemStreamPartition: {d!r} ({e})") from e


@functools.lru_cache(maxsize=1 << 16)
def ssp_to_key(ssp: SystemStreamPartition) -> str:
    """Map-key form: `system.stream.partition`, plus `.keyBucket` only for an SSPKb (made once per SSP: each
    batch's summary keys its lag and offsets by it, thousands at thousands of virtual tasks)."""
    base = f"{ssp.system}.{ssp.stream}.{ssp.partition}"
    return f"{base}.{ssp.key_bucket}" if ssp.has_key_bucket else base


def ssp_from_key(text: str) -> SystemStreamPartition:
    """Read `system.stream.partition[.keyBucket]`.

    Unlike Samza (which splits on every dot) the stream may contain dots; a key
    ending in two integers is read as the 4-part form.
    """
    parts = text.split(".")
    if len(parts) < 3:
        raise SerdeError(f"SSP key {text!r} is not 'system.stream.partition' or 'system.stream.partition.keyBucket'")

    def is_int(s: str) -> bool:
        return s.lstrip("-").isdigit()

    try:
        if len(parts) >= 4 and is_int(parts[-1]) and is_int(parts[-2]):
            return SystemStreamPartition(parts[0], ".".join(parts[1:-2]), int(parts[-2]), int(parts[-1]))
        if is_int(parts[-1]):
            return SystemStreamPartition(parts[0], ".".join(parts[1:-1]), int(parts[-1]))
    except ValueError as e:
        raise SerdeError(f"SSP key {text!r}: {e}") from e
    raise SerdeError(f"SSP key {text!r} does not end in a partition number")


# --- TaskModel, ContainerModel, JobModel -------------------------------------


def task_model_to_dict(task: TaskModel) -> dict[str, Any]:
    return {
        "task-name": task.task_name.name,
        "system-stream-partitions": [ssp_to_dict(s) for s in sorted(task.system_stream_partitions)],
        "changelog-partition": task.changelog_partition,
        "task-mode": task.task_mode.value,
    }


def task_model_from_dict(d: dict[str, Any]) -> TaskModel:
    try:
        return TaskModel(
            TaskName(d["task-name"]),
            frozenset(ssp_from_dict(s) for s in d["system-stream-partitions"]),
            int(d["changelog-partition"]),
            TaskMode(d.get("task-mode") or TaskMode.ACTIVE.value),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise SerdeError(f"not a TaskModel: {e}") from e


def container_model_to_dict(c: ContainerModel) -> dict[str, Any]:
    return {"processor-id": c.processor_id, "tasks": {t.task_name.name: task_model_to_dict(t) for t in c.tasks}}


def container_model_from_dict(d: dict[str, Any], fallback_id: str = "") -> ContainerModel:
    # Samza before 1.0 wrote `container-id`; newer versions write `processor-id`.
    pid = str(d.get("processor-id", d.get("container-id", fallback_id)))
    return ContainerModel(pid, tuple(task_model_from_dict(t) for t in d.get("tasks", {}).values()))


def job_model_to_dict(m: JobModel) -> dict[str, Any]:
    return {
        "config": dict(m.config),
        "containers": {c.processor_id: container_model_to_dict(c) for c in m.containers},
    }


def job_model_from_dict(d: dict[str, Any]) -> JobModel:
    containers = d.get("containers")
    if not isinstance(containers, dict):
        raise SerdeError("a JobModel needs a 'containers' object")
    return JobModel.of(
        {str(k): str(v) for k, v in d.get("config", {}).items()},
        (container_model_from_dict(c, cid) for cid, c in containers.items()),
    )


def job_model_to_json(m: JobModel, indent: int | None = 2) -> str:
    return json.dumps(job_model_to_dict(m), indent=indent)


def job_model_from_json(text: str) -> JobModel:
    return job_model_from_dict(json.loads(text))
