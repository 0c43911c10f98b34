"""The checkpoint tool's JSON: `{"<task>": {"<system>.<stream>.<partition>[.<keyBucket>]": "<offset>"}}`.

Offsets are the next record to process. Watermarks, when a task has any, sit
beside the tasks under the top-level key "watermarks" (no task can bear that name).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from elasticity.checkpoint.task_checkpoint import TaskCheckpoint, Watermark
from elasticity.jobmodel.model import TaskName
from elasticity.jobmodel.object_mapper import SerdeError, ssp_from_key, ssp_to_key

WATERMARKS = "watermarks"


def checkpoints_to_tool_json(cps: Iterable[TaskCheckpoint]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    marks: dict[str, Any] = {}
    for cp in sorted(cps, key=lambda c: c.task_name):
        out[cp.task_name.name] = {ssp_to_key(s): str(o) for s, o in sorted(cp.offsets.items())}
        if cp.watermarks:
            marks[cp.task_name.name] = {
                ssp_to_key(s): [{"factor": w.factor, "bucket": w.bucket, "offset": str(w.offset)} for w in wms]
                for s, wms in sorted(cp.watermarks.items())
            }
    if marks:
        out[WATERMARKS] = marks
    return out


def checkpoints_from_tool_json(doc: dict[str, Any]) -> list[TaskCheckpoint]:
    if not isinstance(doc, dict):
        raise SerdeError("checkpoint file must be a JSON object of task name -> {ssp: offset}")
    marks = doc.get(WATERMARKS, {})
    out = []
    for task, offsets in doc.items():
        if task == WATERMARKS:
            continue
        try:
            parsed = {ssp_from_key(k): int(v) for k, v in offsets.items()}
            wms = {
                ssp_from_key(k): tuple(Watermark(int(w["factor"]), int(w["bucket"]), int(w["offset"])) for w in v)
                for k, v in marks.get(task, {}).items()
            }
        except (AttributeError, KeyError, TypeError, ValueError) as e:
            raise SerdeError(f"task {task!r}: offsets must be {{'system.stream.partition[.keyBucket]': '<offset>'}} ({e})") from e
        out.append(TaskCheckpoint(task_name=TaskName(task), offsets=parsed, watermarks=wms))
    return out
