"""Runs the data-quality suites for a job over a window of committed batches and
writes its report: `runs/<run>/` (Great Expectations Data Docs, `summary.html`,
`summary.json`) per run, and at the report root `runs.jsonl` (a line per kept run), a rolling
`summary.html` that links the latest runs, and `summary.json` of the latest. Each run applies the report's
retention (`quality.report.retain.*`), so the folder stays bounded however long the job runs.

Incremental (what the Asset and rescales trigger): the batches committed since
the last validated one, reading only their audit and sink files and their input
ranges. A manual window (from/to batch) validates any range of batches."""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd

from elasticity import faults
from elasticity.api.stream import ApplicationDescriptor, load_application
from elasticity.batch.coordinator import Inputs, JobCoordinator
from elasticity.batch.exactly_once import provenance
from elasticity.batch.reader import Chunk, close_consumers, read_chunk
from elasticity.batch.sinks import AUDIT_SCHEMA, OUTPUT_SCHEMA, output_roots, read_table
from elasticity.checkpoint.commit_record import complete_records
from elasticity.checkpoint.store import CheckpointStore
from elasticity.config import JobConfig
from elasticity.jobmodel.model import SystemStreamPartition
from elasticity.kafka.admin import client_settings
from elasticity.kafka.transactions import commit_topic, read_commit_tail, read_committed
from elasticity.quality import cursor, history, state_check
from elasticity.quality.checks import KAFKA_COLUMNS, Done, QualityInputs
from elasticity.quality.report import summary_html, write_index
from elasticity.quality.suite import QualityResult, run_suites
from elasticity.state.backends.blob_manager import BlobNotFound

log = logging.getLogger(__name__)
PIN_ATTEMPTS = 30
Stored = dict[str, dict[Any, Any]] | None  # store -> key -> committed value (None: the app has no state reference)


class QualityFailed(AssertionError):
    pass


def _read_inputs(
    config: JobConfig,
    starts: dict[SystemStreamPartition, int],
    ends: dict[SystemStreamPartition, int],
    columns: tuple[str, ...] = ("system", "stream", "partition", "offset", "key"),
) -> pd.DataFrame:
    rows = []
    names = list(columns)  # a list: pandas reads a tuple as one column's name
    try:
        for ssp, start in starts.items():
            bootstrap = client_settings(config, ssp.system)
            for batch in read_chunk(Chunk(bootstrap, ssp.system, ssp.stream, ssp.partition, start, ends[ssp])):
                rows.append(batch.to_pandas()[names])
    finally:
        close_consumers()
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=names)


def _expected_state(
    config: JobConfig, app: ApplicationDescriptor, stored: Stored, committed: list[int], audit: pd.DataFrame | None
) -> pd.DataFrame | None:
    """The `state` check's table: the stores' committed values beside what the app's references recompute
    from every record the committed batches processed; `audit`: theirs, when already read."""
    if stored is None:
        return None
    if audit is None:
        audit = read_table(config.path("job.audit.path", "audit"), AUDIT_SCHEMA, committed).to_pandas()
    done = audit[audit["status"] == "processed"]
    starts = {
        SystemStreamPartition(s, t, int(p)): int(o)
        for (s, t, p), o in done.groupby(["system", "stream", "partition"])["offset"].min().items()
    }
    ends = {
        SystemStreamPartition(s, t, int(p)): int(o) + 1
        for (s, t, p), o in done.groupby(["system", "stream", "partition"])["offset"].max().items()
    }
    records = _read_inputs(config, starts, ends, ("system", "stream", "partition", "offset", "key", "value", "timestamp"))
    messages = state_check.processed_messages(config, done, records)
    expected = {name: fold(messages) for name, fold in app.references.items()}
    return state_check.state_table(stored, expected)


def _kafka_outputs(
    config: JobConfig, app: ApplicationDescriptor, window: list[int]
) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    """The job's exactly-once Kafka outputs as a read_committed reader sees them (KAFKA_COLUMNS, from each
    record's provenance headers), and per committed batch of the window and output how many records its commit
    record says it sent (`recorded`: a commit record of the batch is visible; `sent` None: it has no counts,
    written before they were). (None, None): the job has none."""
    if config.processing_guarantee != "exactly_once":
        return None, None
    outputs = sorted({(o.system, o.name) for o in app.outputs.values() if o.kind == "kafka"})
    if not outputs:
        return None, None
    kafka = client_settings(config, outputs[0][0])
    rows = [
        {"output": name, "partition": r.partition, "offset": r.offset, "key": r.key, **provenance(r.headers)}
        for _, name in outputs
        for r in read_committed(kafka, name)
    ]
    records = pd.DataFrame(rows, columns=KAFKA_COLUMNS)
    for c in ("source_partition", "source_offset", "batch_id", "seq"):
        records[c] = pd.to_numeric(records[c]).astype("Int64")
    sent: dict[int, dict[str, int] | None] = {}
    for record in complete_records(read_commit_tail(kafka, commit_topic(config.job_name, config.job_id), None), config.job_name):
        sent |= {b: record.outputs.get(b) for b in record.batch_ids}  # None: a record written before the counts
    batches = pd.DataFrame(
        [
            {
                "batch_id": b,
                "output": name,
                "recorded": b in sent,
                "sent": None if (counts := sent.get(b)) is None else counts.get(name, 0),
            }
            for b in window
            for _, name in outputs
        ],
        columns=["batch_id", "output", "recorded", "sent"],
    )
    return records, batches.astype({"batch_id": "Int64", "sent": "Float64"})


def _consistent_state(store: CheckpointStore, coordinator: JobCoordinator, attempts: int = 20):
    """The committed batches and the checkpoints that include exactly them: batches keep
    committing while data quality runs, so read until no commit landed in between."""
    for _ in range(attempts):
        committed = store.plans(coordinator.job, "committed")
        generation = coordinator.current()
        cps = coordinator.checkpoints(generation) if generation else {}
        if [p.batch_id for p in store.plans(coordinator.job, "committed")] == [p.batch_id for p in committed]:
            return committed, generation, cps
        time.sleep(0.5)
    raise RuntimeError(f"job {coordinator.job!r}: batches kept committing while data quality read the checkpoints")


def _pinned_state(config: JobConfig, store: CheckpointStore, coordinator: JobCoordinator, app: ApplicationDescriptor):
    """The committed batches, their checkpoints and (for the `state` check) the stores' values those checkpoints
    commit, read together, before the slow reads. Each commit deletes the blob-store snapshots beyond
    `stores.<store>.blob.retain`, so a snapshot that vanishes while it is restored was superseded by a newer
    commit: read again from the newer checkpoints. Gone twice under the same checkpoints, it is lost."""
    missing = None
    for _ in range(PIN_ATTEMPTS):
        committed, generation, cps = _consistent_state(store, coordinator)
        if not app.references or generation is None:
            return committed, generation, cps, None
        faults.point("quality.state.pinned")
        try:
            return committed, generation, cps, state_check.committed_state(config, app, generation, cps)
        except BlobNotFound as e:
            pinned = (generation.number, [p.batch_id for p in committed])
            if pinned == missing:
                raise
            missing = pinned
            log.info("superseded while data quality restored it, reading newer checkpoints: %s", e)
    raise RuntimeError(f"job {coordinator.job!r}: snapshots kept being superseded while data quality restored them")


def load_inputs(
    config: JobConfig,
    store: CheckpointStore,
    inputs: Inputs,
    from_batch: int | None,
    to_batch: int | None,
    since: cursor.Cursor | None = None,
) -> tuple[QualityInputs, str, list[int]]:
    """The window's facts; with `since`, the batches after its last one, checked against its edge."""
    coordinator = JobCoordinator(config, store, inputs)
    app = load_application(config.app_class, config.inputs)
    committed, generation, cps, stored = _pinned_state(config, store, coordinator, app)
    if since is not None:
        window = [p for p in committed if p.batch_id > since.last_batch]
    else:
        window = [
            p
            for p in committed
            if (from_batch is None or p.batch_id >= from_batch) and (to_batch is None or p.batch_id <= to_batch)
        ]
    ids = [p.batch_id for p in window] if since is not None else [p.batch_id for p in committed]
    audit = read_table(config.path("job.audit.path", "audit"), AUDIT_SCHEMA, ids).to_pandas()

    starts: dict[SystemStreamPartition, int] = {}
    ends: dict[SystemStreamPartition, int] = {}
    for p in window:
        for r in p.ranges:
            starts[r.ssp] = min(r.start, starts.get(r.ssp, r.start))
            ends[r.ssp] = max(r.end, ends.get(r.ssp, r.end))
    for cp in cps.values():  # up to what the checkpoints claim, so nothing claimed escapes the check
        for ssp, offset in cp.offsets.items():
            base = ssp.without_key_bucket()
            if base in starts:
                ends[base] = max(offset, ends[base])
    records = _read_inputs(config, starts, ends)

    sinks = []
    for root in output_roots(config.path("job.output.path", "output")):
        name = root.rsplit("/", 1)[1]
        sinks.append(read_table(root, OUTPUT_SCHEMA, [p.batch_id for p in window]).to_pandas().assign(output=name))
    sink = pd.concat(sinks, ignore_index=True) if sinks else pd.DataFrame()

    span = f"batches {window[0].batch_id}..{window[-1].batch_id}" if window else "no new committed batch"
    if since is not None:
        span += f" (new since batch {since.last_batch})" if since.last_batch else " (the first validation)"
    q = QualityInputs(
        audit,
        records,
        sink,
        {p.batch_id: p.generation for p in committed},
        generation.factor if generation else 1,
        cps,
        since.done if since else None,
        since.positions if since else None,
        _expected_state(config, app, stored, [p.batch_id for p in committed], audit if since is None else None),
        *_kafka_outputs(config, app, [p.batch_id for p in window]),
    )
    return q, span, [p.batch_id for p in window]


def run_quality(
    config: JobConfig,
    store: CheckpointStore,
    inputs: Inputs,
    from_batch: int | None = None,
    to_batch: int | None = None,
    report_dir: str | os.PathLike[str] | None = None,
    incremental: bool = False,
    run_name: str | None = None,
) -> tuple[QualityResult, Path]:
    """Validate and report; returns the result and the run's summary.html. An incremental
    run that passes moves the job's validated edge to its last batch."""
    root = Path(report_dir or config.path("job.report.path", "reports"))
    since = (
        (cursor.load(root) or cursor.Cursor(0, Done(1, {}), pd.DataFrame(columns=cursor.POSITION_COLUMNS)))
        if incremental
        else None
    )
    q, span, window = load_inputs(config, store, inputs, from_batch, to_batch, since)
    name = run_name or time.strftime("%Y%m%dT%H%M%S")
    folder = root / "runs" / "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    result = run_suites(q, folder, config.job_name, name, span)
    metrics = store.metrics(config.job_name, limit=200)
    summary = {
        "job": config.job_name,
        "run": name,
        "window": span,
        "batches": window,
        "success": result.success,
        "finished_ms": int(time.time() * 1000),
        "checks": [asdict(c) for c in result.checks],
    }
    (folder / "summary.html").write_text(summary_html(config.job_name, result, metrics, f"Run {name}, window: {span}"))
    (folder / "summary.json").write_text(json.dumps(summary, indent=2))
    if incremental and result.success and window:
        cursor.advance(root, since, window[-1], Done(q.factor, q.checkpoints), q.audit, q.generation_of_batch)
    history.record_run(root, summary, folder.name)
    history.expire_runs(root, keep=config.quality_retain_runs, keep_failed=config.quality_retain_failed_runs)
    (root / "summary.json").write_text(json.dumps({**summary, "folder": str(folder.relative_to(root))}, indent=2))
    write_index(root, config.job_name, metrics)
    return result, folder / "summary.html"
