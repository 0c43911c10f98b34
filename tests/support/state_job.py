"""A small deterministic stateful job over the state package, for tests, the crash
driver and the benchmark: two virtual tasks count records per key in a store
(deleting a key's count when it reaches 5), and a JSON file plays the
checkpoint store, written after the uploads as the engine's driver would.

usage (crash driver): python -m tests.support.state_job WORKDIR BATCHES PROPS_JSON [KILL_POINT KILL_FROM_BATCH]
SIGKILLs itself at KILL_POINT once batch KILL_FROM_BATCH has started.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections import Counter
from pathlib import Path

from elasticity import faults
from elasticity.api import StoreDescriptor
from elasticity.checkpoint.serde import v2_from_json, v2_to_json
from elasticity.checkpoint.task_checkpoint import CheckpointId, CheckpointV2
from elasticity.config import validate
from elasticity.jobmodel.keybucket import key_hash
from elasticity.jobmodel.model import TaskModel, TaskName
from elasticity.state import ContainerStorageManager, StorageConfig

COUNTS = StoreDescriptor("counts", "string", "json")
TASKS = (TaskName("Partition_0-0-2"), TaskName("Partition_0-1-2"))
RECORDS_PER_BATCH = 60


def batch_keys(batch: int) -> list[str]:
    return [f"k{(batch * 7 + i * 3) % 17}" for i in range(RECORDS_PER_BATCH)]


def owner(key: str) -> TaskName:
    return TASKS[key_hash(key.encode()) % 2]


def process(store, key: str) -> None:
    n = (store.get(key) or 0) + 1
    store.put(key, None if n == 5 else n)


def reference(batches: int) -> dict[str, int]:
    """The counts after `batches` batches, computed without the store."""
    out: Counter[str] = Counter()
    for b in range(batches):
        for k in batch_keys(b):
            out[k] += 1
            if out[k] == 5:
                del out[k]
    return dict(out)


def manager(props: dict[str, str]) -> ContainerStorageManager:
    config = validate({"job.name": "statejob", "task.inputs": "kafka.in", "task.checkpoint.read.versions": "2,1", **props})
    models = [TaskModel(t, frozenset(), i) for i, t in enumerate(TASKS)]
    return ContainerStorageManager(StorageConfig.of(config, [COUNTS]), [COUNTS], models, len(models))


def committed(workdir: Path) -> tuple[int, dict[TaskName, CheckpointV2] | None]:
    f = workdir / "checkpoints.json"
    if not f.exists():
        return 0, None
    d = json.loads(f.read_text())
    return d["batches"], {TaskName(t): v2_from_json(p) for t, p in d["tasks"].items()}


def write_checkpoints(workdir: Path, batches: int, cps: dict[TaskName, CheckpointV2]) -> None:
    tmp = workdir / "checkpoints.json.tmp"
    tmp.write_text(json.dumps({"batches": batches, "tasks": {t.name: v2_to_json(cp) for t, cp in cps.items()}}))
    os.replace(tmp, workdir / "checkpoints.json")


def state(csm: ContainerStorageManager) -> dict[str, int]:
    out: dict[str, int] = {}
    for t in TASKS:
        out.update(dict(csm.store(t, "counts").all()))
    return out


def run(workdir: Path, batches: int, props: dict[str, str]) -> dict[str, int]:
    """Restore from the last checkpoint, then process and commit up to `batches`; returns the final state."""
    workdir.mkdir(parents=True, exist_ok=True)
    csm = manager(props)
    try:
        done, cps = committed(workdir)
        csm.restore(cps or {})
        for b in range(done, batches):
            faults.point(f"batch.{b}")
            for k in batch_keys(b):
                process(csm.store(owner(k), "counts"), k)
            cp_id = CheckpointId.create()
            markers = csm.upload(csm.snapshot(cp_id))
            cps = {t: CheckpointV2(cp_id, {}, markers[t]) for t in TASKS}
            faults.point("driver.before_checkpoint")
            write_checkpoints(workdir, b + 1, cps)
            faults.point("driver.checkpoint_written")
            csm.cleanup(cps)
            faults.point("driver.cleaned")
        return state(csm)
    finally:
        csm.close()


def main(argv: list[str]) -> None:
    workdir, batches, props = Path(argv[0]), int(argv[1]), json.loads(argv[2])
    if len(argv) > 3:
        point, from_batch = argv[3], int(argv[4])
        armed = [False]

        def kill(name: str) -> None:
            armed[0] = armed[0] or name == f"batch.{from_batch}"
            if armed[0] and name == point:
                os.kill(os.getpid(), signal.SIGKILL)

        with faults.hook(kill):
            run(workdir, batches, props)
        sys.exit(3)  # the point was never reached
    run(workdir, batches, props)


if __name__ == "__main__":
    main(sys.argv[1:])
