"""The commit record: the checkpoints a commit writes, carried inside the Kafka transaction of its outputs.

With exactly-once Kafka outputs the transaction decides: once it commits, the batches it covers are done, and
a run that died before writing their checkpoints to the store writes them from this record (roll forward).
A record is cut into parts (a part per `PART_TASKS` virtual tasks, well under Kafka's 1 MB message limit); the
parts go in the same transaction, so a reader sees all of them or none.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from elasticity.checkpoint.serde import v2_from_json, v2_to_json, watermarks_from_json, watermarks_to_json
from elasticity.checkpoint.task_checkpoint import TaskCheckpoint, to_v2
from elasticity.jobmodel.model import TaskName
from elasticity.jobmodel.object_mapper import SerdeError

PART_TASKS = 500


@dataclass(frozen=True, kw_only=True)
class CommitRecord:
    job_name: str
    generation: int
    batch_ids: tuple[int, ...]  # the batches this commit covers, the last one the commit's own
    commit_id: str  # unique per commit: parts of one record share it
    checkpoints: tuple[TaskCheckpoint, ...]
    outputs: dict[int, dict[str, int]] = field(default_factory=dict)  # batch -> Kafka output -> records it sent

    @property
    def batch_id(self) -> int:
        return self.batch_ids[-1]


def to_parts(record: CommitRecord) -> list[bytes]:
    cps = list(record.checkpoints)
    chunks = [cps[i : i + PART_TASKS] for i in range(0, len(cps), PART_TASKS)] or [[]]
    head = {
        "job": record.job_name,
        "generation": record.generation,
        "batches": list(record.batch_ids),
        "outputs": {str(b): counts for b, counts in record.outputs.items()},
    }
    return [
        json.dumps(
            {
                **head,
                "commit": record.commit_id,
                "part": i,
                "parts": len(chunks),
                "checkpoints": [
                    {
                        "task": cp.task_name.name,
                        "v2": v2_to_json(to_v2(cp)),
                        "stateful": cp.checkpoint_id is not None,  # a stateless checkpoint has no id of its own
                        "watermarks": watermarks_to_json(cp.watermarks),
                    }
                    for cp in chunk
                ],
            },
            separators=(",", ":"),
        ).encode()
        for i, chunk in enumerate(chunks)
    ]


def _checkpoint(d: dict) -> TaskCheckpoint:
    v2 = v2_from_json(d["v2"])
    return TaskCheckpoint(
        task_name=TaskName(d["task"]),
        offsets={ssp: int(o) for ssp, o in v2.input_offsets.items()},
        watermarks=watermarks_from_json(d["watermarks"]),
        checkpoint_id=v2.checkpoint_id if d["stateful"] else None,
        state_markers=v2.state_checkpoint_markers,
    )


def last_record(parts: Sequence[bytes], job_name: str) -> CommitRecord | None:
    """The newest complete record of `job_name` among parts read in log order (a commit topic's tail)."""
    return next(reversed(complete_records(parts, job_name)), None)


def complete_records(parts: Sequence[bytes], job_name: str) -> list[CommitRecord]:
    """Every complete record of `job_name` among parts read in log order, oldest first."""
    by_commit: dict[str, dict[int, dict]] = {}
    for raw in parts:
        try:
            d = json.loads(raw)
            if d["job"] != job_name:
                continue
            commit = str(d["commit"])
        except (ValueError, KeyError, TypeError) as e:
            raise SerdeError(f"not a commit record of job {job_name!r}: {raw[:200]!r}") from e
        by_commit.setdefault(commit, {})[int(d["part"])] = d
    records = []
    for commit, got in by_commit.items():  # in order of first appearance
        first = next(iter(got.values()))
        if len(got) == int(first["parts"]):
            cps: Iterable[dict] = (c for i in sorted(got) for c in got[i]["checkpoints"])
            outputs = {int(b): {t: int(n) for t, n in c.items()} for b, c in first.get("outputs", {}).items()}
            records.append(
                CommitRecord(
                    job_name=job_name,
                    generation=int(first["generation"]),
                    batch_ids=tuple(int(b) for b in first["batches"]),
                    commit_id=commit,
                    checkpoints=tuple(map(_checkpoint, cps)),
                    outputs=outputs,
                )
            )
    return records
