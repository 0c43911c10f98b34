"""The `state` check's facts: for every key of every store, the committed value
beside the value the app's `state_reference` recomputes from the processed
input below the current checkpoints.

The committed values are restored from the markers of the current checkpoints
(the first restore factory with a marker, as a task would) into a temporary
folder, read-only: no Spark, never the job's own folders, and no changelog
trimming (that is the job's to do). The input is every record the committed
batches audited as processed, re-read from Kafka and decoded as the job does.
"""

from __future__ import annotations

import json
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd

from elasticity.api.stream import ApplicationDescriptor, Message
from elasticity.batch.sinks.outputs import AuditStatus
from elasticity.checkpoint.store import Generation
from elasticity.checkpoint.task_checkpoint import TaskCheckpoint, state_of
from elasticity.config import BLOB_STORE_FACTORY, JobConfig
from elasticity.jobmodel.model import SystemStreamPartition, TaskName
from elasticity.serializers import deserialize
from elasticity.state.container import ContainerStorageManager
from elasticity.state.rocksdb import open_db, raw_items
from elasticity.state.store_config import StorageConfig

COLUMNS = ["store", "key", "stored", "expected", "matches", "record"]
RESTORE_THREADS = 8


def committed_state(
    config: JobConfig,
    app: ApplicationDescriptor,
    generation: Generation,
    cps: dict[TaskName, TaskCheckpoint],
) -> dict[str, dict[Any, Any]]:
    """store -> key -> value, as the current checkpoints commit them. A committed marker is durable (the
    driver waited for it before writing the checkpoint), so a blob not there is not awaited: BlobNotFound,
    its snapshot deleted since by newer commits. The stores restore side by side, to keep that window short."""
    descriptors = list(app.stores.values())
    tasks = generation.job_model.tasks()
    out: dict[str, dict[Any, Any]] = {d.name: {} for d in descriptors}
    with tempfile.TemporaryDirectory(prefix="elasticity-state-check-") as tmp:
        storage = replace(StorageConfig.of(config, descriptors), state_dir=Path(tmp), commit_timeout_ms=0)
        csm = ContainerStorageManager(storage, descriptors, tasks, len(tasks))

        def restore(name: str, ts: Any, factory: str, marker: str) -> list[tuple[Any, Any]]:
            folder = ts.dirs.root / "check"
            ts.backends[factory].restore(marker, folder)
            db = open_db(folder)
            try:
                d = ts.context.descriptor  # the job's value serde, if it names one (stores.<store>.msg.serde)
                return [(d.key_from(k), d.value_from(v)) for k, v in raw_items(db)]
            finally:
                db.close()

        try:
            jobs = []
            for task, stores in csm.tasks.items():
                cp = state_of(cps[task]) if task in cps else None
                for name, ts in stores.items():
                    markers = {f: m[name] for f, m in (cp.state_checkpoint_markers if cp else {}).items() if name in m}
                    factory = next((f for f in ts.context.config.restore_factories if f in markers), None)
                    if factory is not None:  # else nothing committed for this store yet
                        jobs.append((name, ts, factory, markers[factory]))
            # side by side from the blob store (thread-safe clients); a changelog's Kafka client is not
            threads = RESTORE_THREADS if all(j[2] == BLOB_STORE_FACTORY for j in jobs) else 1
            with ThreadPoolExecutor(threads) as pool:
                for (name, *_), items in zip(jobs, pool.map(lambda j: restore(*j), jobs), strict=True):
                    out[name].update(items)
        finally:
            csm.close()
    return out


def processed_messages(config: JobConfig, audit: pd.DataFrame, records: pd.DataFrame) -> list[Message]:
    """The audited-as-processed input records, decoded, in (ssp, offset) order."""
    done = audit[audit["status"] == AuditStatus.PROCESSED][["system", "stream", "partition", "offset"]]
    rows = records.merge(done, on=["system", "stream", "partition", "offset"]).sort_values(
        ["system", "stream", "partition", "offset"]
    )
    out = []
    for r in rows.itertuples(index=False):
        key = deserialize(config.serde(r.system, "key", r.stream), r.key, "key")
        value = deserialize(config.serde(r.system, "msg", r.stream), r.value, "value")
        out.append(
            Message(
                key=key,
                value=value,
                ssp=SystemStreamPartition(r.system, r.stream, int(r.partition)),
                offset=int(r.offset),
                timestamp=int(r.timestamp),
            )
        )
    return out


def state_table(stored: dict[str, dict[Any, Any]], expected: dict[str, dict[Any, Any]]) -> pd.DataFrame:
    """One row per (store, key) found in either; `matches` is what the check expects True."""
    rows = []
    for store in sorted(expected):
        have, want = stored.get(store, {}), expected[store]
        for key in sorted(set(have) | set(want), key=repr):
            s, e = have.get(key), want.get(key)
            rows.append(
                {
                    "store": store,
                    "key": repr(key),
                    "stored": json.dumps(s, sort_keys=True),
                    "expected": json.dumps(e, sort_keys=True),
                    "matches": s == e,
                    "record": f"store {store} key={key!r}: stored {s!r}, recomputed {e!r}",
                }
            )
    return pd.DataFrame(rows, columns=COLUMNS)
