"""Runs the data-quality suites for a job over a window of committed batches and
writes its report to the job's report location (its object store, or a local folder when it has none):
`runs/<run>/` (Great Expectations Data Docs, `summary.html`, `summary.json`) per run, built in a scratch
folder of this process and put there whole, a rolling `summary.html` that links the latest runs, and
`summary.json` of the latest. The run's line goes to the index in the checkpoint store; each run applies the
report's retention (`quality.report.retain.*`), so the reports stay bounded however long the job runs.

Incremental (what the Asset and rescales trigger): the batches committed since
the last validated one (the edge, in the checkpoint store), reading only their audit and sink files and their
input ranges. A manual window (from/to batch) validates any range of batches."""

from __future__ import annotations

import inspect
import json
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from elasticity.api.stream import ApplicationDescriptor, load_application
from elasticity.batch.container.container_process import container_process
from elasticity.batch.container.reader import Chunk, read_chunk
from elasticity.batch.coordinator.job_coordinator import Inputs, JobCoordinator
from elasticity.batch.sinks.outputs import AUDIT_SCHEMA, OUTPUT_SCHEMA, AuditStatus, output_roots, read_table
from elasticity.checkpoint.batch_plan import BatchPlan, BatchStatus
from elasticity.checkpoint.replay import Replay
from elasticity.checkpoint.store import CheckpointStore
from elasticity.checkpoint.task_checkpoint import TaskCheckpoint
from elasticity.config import JobConfig
from elasticity.config.names import path_part
from elasticity.jobmodel.model import SystemStreamPartition, TaskName
from elasticity.kafka.admin import client_settings
from elasticity.quality import cursor, history, state_check
from elasticity.quality.checks import LOST_COLUMNS, Done, QualityInputs
from elasticity.quality.kafka_outputs import KafkaOutputs, kafka_outputs, kafka_positions
from elasticity.quality.pinned_state import pinned_state
from elasticity.quality.replay_versions import Versions
from elasticity.quality.report import summary_html, write_index
from elasticity.quality.report_files import ReportFiles, public
from elasticity.quality.suite import QualityResult, run_suites

log = logging.getLogger(__name__)
Stored = dict[str, dict[Any, Any]] | None  # store -> key -> committed value (None: the app has no state reference)


class QualityFailed(AssertionError):
    pass


KEYS = ("system", "stream", "partition", "offset", "key")
WITH_VALUES = (*KEYS, "value", "timestamp")


def _read_inputs(
    config: JobConfig,
    starts: dict[SystemStreamPartition, int],
    ends: dict[SystemStreamPartition, int],
    columns: tuple[str, ...] = KEYS,
) -> pd.DataFrame:
    rows = []
    names = list(columns)  # a list: pandas reads a tuple as one column's name
    try:
        for ssp, start in starts.items():
            bootstrap = client_settings(config, ssp.system)
            for batch in read_chunk(
                Chunk(
                    bootstrap=bootstrap, system=ssp.system, stream=ssp.stream, partition=ssp.partition, start=start, end=ends[ssp]
                )
            ):
                rows.append(batch.to_pandas()[names])
    finally:
        container_process().close_consumers()  # a driver that read directly, not a Spark worker
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=names)


def _folds_from_edge(app: ApplicationDescriptor) -> bool:
    """Every state reference takes `start` (the expected store at the edge): the check folds only the new batches."""
    return all("start" in inspect.signature(fold).parameters for fold in app.references.values())


def _expected_state(
    config: JobConfig,
    app: ApplicationDescriptor,
    stored: Stored,
    *,
    since: cursor.Cursor | None,
    window: pd.DataFrame,
    records: pd.DataFrame,
    history: Callable[[], pd.DataFrame],
) -> tuple[pd.DataFrame | None, cursor.State | None]:
    """The `state` check's table (the stores' committed values beside what the app's references compute) and
    the expected stores themselves. From an edge that carries the expected stores, the references fold the
    window's processed records into them (`window`: its audit, `records`: its input with values); otherwise
    they recompute from every record the committed batches processed, read again."""
    if stored is None:
        return None, None
    if since is not None and since.state is not None and _folds_from_edge(app):
        messages = state_check.processed_messages(config, window, records)
        expected = {name: fold(messages, start=dict(since.state.get(name, {}))) for name, fold in app.references.items()}
        return state_check.state_table(stored, expected), expected
    if since is not None:
        log.info(
            "data quality recomputes the state from the job's first batch (no expected state at the edge, or a reference without `start`)"
        )
    audit = history()
    done = audit[audit["status"] == AuditStatus.PROCESSED]
    starts = {
        SystemStreamPartition(s, t, int(p)): int(o)
        for (s, t, p), o in done.groupby(["system", "stream", "partition"])["offset"].min().items()
    }
    ends = {
        SystemStreamPartition(s, t, int(p)): int(o) + 1
        for (s, t, p), o in done.groupby(["system", "stream", "partition"])["offset"].max().items()
    }
    records = _read_inputs(config, starts, ends, WITH_VALUES)
    messages = state_check.processed_messages(config, done, records)
    expected = {name: fold(messages) for name, fold in app.references.items()}
    return state_check.state_table(stored, expected), expected


def _audit_through(config: JobConfig, store: CheckpointStore, last: int, *, versions: Versions, version: int) -> pd.DataFrame:
    """The audit of every committed batch of `version` up to `last` (the pinned ones): what a recomputation from
    the version's first batch reads (a replay's version starts with its stores empty)."""
    ids = [
        p.batch_id
        for p in store.plans(config.job_name, BatchStatus.COMMITTED)
        if p.batch_id <= last and versions.of_batch(p) == version
    ]
    return read_table(config.audit_dir, AUDIT_SCHEMA, ids).to_pandas()


def _within(batch_id: int, from_batch: int | None, to_batch: int | None) -> bool:
    return (from_batch is None or batch_id >= from_batch) and (to_batch is None or batch_id <= to_batch)


def _sink_rows(config: JobConfig, ids: list[int]) -> pd.DataFrame:
    """The batches' rows of every Parquet output, each with its output's name."""
    sinks = [
        read_table(root, OUTPUT_SCHEMA, ids).to_pandas().assign(output=root.rsplit("/", 1)[1])
        for root in output_roots(config.output_dir)
    ]
    return pd.concat(sinks, ignore_index=True) if sinks else pd.DataFrame()


def _input_ranges(
    window: list[BatchPlan], cps: Mapping[TaskName, TaskCheckpoint], inputs: Inputs
) -> tuple[dict[SystemStreamPartition, int], dict[SystemStreamPartition, int]]:
    """Per input partition, what the window's batches read, up to what the checkpoints claim (so nothing claimed
    escapes the check), from what the log still holds (records retention removed are gone: lost_table has them)."""
    starts: dict[SystemStreamPartition, int] = {}
    ends: dict[SystemStreamPartition, int] = {}
    for p in window:
        for r in p.ranges:
            starts[r.ssp] = min(r.start, starts.get(r.ssp, r.start))
            ends[r.ssp] = max(r.end, ends.get(r.ssp, r.end))
    for cp in cps.values():
        for ssp, offset in cp.offsets.items():
            base = ssp.without_key_bucket()
            if base in starts:
                ends[base] = max(offset, ends[base])
    if starts:
        log_start = inputs.offsets(list(starts), "oldest")
        starts = {s: min(max(start, log_start.get(s, start)), ends[s]) for s, start in starts.items()}
    return starts, ends


@dataclass(frozen=True, kw_only=True)
class Loaded:
    """What a run checks, what it covers, and the edge it leaves when it passes (incremental runs). `more`: the
    window stopped at a replay (a new version): the batches after are the next run's."""

    inputs: QualityInputs
    span: str
    window: list[int]
    edge: cursor.Cursor | None
    more: bool = False


def _version_start(since: cursor.Cursor, replay: Replay, version: int) -> cursor.Cursor:
    """The edge a version started by `replay` is checked from: what its start checkpoints had passed is not its
    to do, no key has a position yet, and its stores started empty."""
    return replace(
        since,
        done=Done(replay.factor, dict(replay.start_checkpoints)),
        positions=since.positions.iloc[0:0],
        state={name: {} for name in since.state} if since.state is not None else {},
        kafka_positions=since.kafka_positions.iloc[0:0] if since.kafka_positions is not None else None,
        version=version,
    )


@dataclass(frozen=True, kw_only=True)
class _Scope:
    """What a run covers once replays are counted: its committed batches and window, the edge it starts from and
    what was done before it, the checkpoints and factor its loss check reads, the stores' pinned values (None: not
    checked), its version, and the replay that ends the version when a later one follows in the window."""

    committed: list[BatchPlan]
    window: list[BatchPlan]
    since: cursor.Cursor | None
    before: Done | None
    cps: dict[TaskName, TaskCheckpoint]
    factor: int
    stored: Stored
    version: int
    ended_by: int | None = None


def _scope(job: str, versions: Versions, s: _Scope, *, from_batch: int | None, to_batch: int | None) -> _Scope:
    """`s` (every committed batch since the edge, `s.version` the current generation's) narrowed to one version
    (`quality.replay_versions`). Incremental: the first version among the new batches (none: the current one),
    from the replay's start when it begins one. A manual window: within the version of its last batch. A version
    a later replay ended is checked up to the checkpoints that replay started from, its stores unchecked (the
    replay cleared them)."""
    current, since = s.version, s.since
    if since is not None:
        window, _ = versions.first_segment(s.committed)
        version = versions.of_batch(window[0]) if window else current
        s = replace(s, window=window, version=version)
        if version != since.version and version in versions.replays:  # the window starts a replay's version
            since = _version_start(since, versions.replays[version], version)
            s = replace(s, since=since, before=since.done)
    else:
        window = [p for p in s.committed if _within(p.batch_id, from_batch, to_batch)]
        version = versions.of_batch(window[-1]) if window else current
        s = replace(
            s,
            committed=[p for p in s.committed if versions.of_batch(p) == version],
            window=[p for p in window if versions.of_batch(p) == version],
            version=version,
        )
        if version in versions.replays:
            replay = versions.replays[version]
            s = replace(s, before=Done(replay.factor, dict(replay.start_checkpoints)))
    if version != current:  # a later replay ended this version
        ended_by = min(r for r in versions.replays if r > version)
        log.info("data quality of %s: the batches of the version before replay %d first", job, ended_by)
        ending = versions.replays[ended_by]
        s = replace(s, cps=dict(ending.previous_checkpoints), factor=ending.factor, stored=None, ended_by=ended_by)
    return s


def _pinned_scope(
    config: JobConfig,
    store: CheckpointStore,
    inputs: Inputs,
    *,
    app: ApplicationDescriptor,
    versions: Versions,
    since: cursor.Cursor | None,
    from_batch: int | None,
    to_batch: int | None,
) -> _Scope:
    """The committed batches, checkpoints and stores pinned together (`_pinned_state`), narrowed to one version."""
    coordinator = JobCoordinator(config, store, inputs)
    committed, generation, cps, stored = pinned_state(config, store, coordinator, app=app, after=since.last_batch if since else 0)
    whole = _Scope(
        committed=committed,
        window=committed,
        since=since,
        before=since.done if since else None,
        cps=cps,
        factor=generation.factor if generation else 1,
        stored=stored,
        version=versions.of_generation(generation.number if generation else 0),
    )
    return _scope(config.job_name, versions, whole, from_batch=from_batch, to_batch=to_batch)


def load_inputs(
    config: JobConfig,
    store: CheckpointStore,
    inputs: Inputs,
    *,
    from_batch: int | None,
    to_batch: int | None,
    since: cursor.Cursor | None = None,
) -> Loaded:
    """The window's facts; with `since`, the batches after its last one, checked against its edge and read from it:
    their plans, audit, sink files and input ranges, the Kafka outputs and commit records past the edge, and the
    stores' expected values folded on from the edge's."""
    app = load_application(config.app_class, config.inputs)
    versions = Versions.of(store, config.job_name)
    s = _pinned_scope(config, store, inputs, app=app, versions=versions, since=since, from_batch=from_batch, to_batch=to_batch)
    committed, window, since, cps, stored, version = s.committed, s.window, s.since, s.cps, s.stored, s.version
    ids = [p.batch_id for p in window]
    # a manual window's order, routing and loss are checked against every committed batch's audit
    audit = read_table(config.audit_dir, AUDIT_SCHEMA, ids if since else [p.batch_id for p in committed])
    audit = audit.to_pandas()

    starts, ends = _input_ranges(window, cps, inputs)
    records = _read_inputs(config, starts, ends, WITH_VALUES if stored is not None else KEYS)
    sink = _sink_rows(config, ids)
    state, expected = _expected_state(
        config,
        app,
        stored,
        since=since,
        window=audit,
        records=records,
        history=lambda: (
            audit
            if since is None
            else _audit_through(config, store, ids[-1] if ids else since.last_batch, versions=versions, version=version)
        ),
    )
    kafka = kafka_outputs(config, app, ids, since)
    q = QualityInputs(
        audit=audit,
        inputs=records[list(KEYS)],
        sink=sink,
        generation_of_batch={p.batch_id: p.generation for p in committed},
        factor=s.factor,
        checkpoints=cps,
        before=s.before,
        positions=since.positions if since else None,
        state=state,
        kafka=kafka.records if kafka else None,
        kafka_batches=kafka.batches if kafka else None,
        kafka_positions=since.kafka_positions if since and kafka else None,
        validated_batch=since.last_batch
        if since and kafka and since.kafka_edges
        else 0,  # an edge of an earlier version read none
        lost=_declared_lost(store, config.job_name, ids),
    )
    return _loaded(s, q, ids, expected=expected, kafka=kafka)


def _loaded(s: _Scope, q: QualityInputs, ids: list[int], *, expected: Any, kafka: KafkaOutputs | None) -> Loaded:
    """The run's facts with its span and, incremental, the edge it leaves (of its version; without the stores'
    expected values when a later replay ends the version: that replay cleared them)."""
    since = s.since
    span = f"batches {ids[0]}..{ids[-1]}" if ids else "no new committed batch"
    if s.version:
        span += f", version of replay {s.version}"
    if since is None:
        return Loaded(inputs=q, span=span, window=ids, edge=None)
    span += f" (new since batch {since.last_batch})" if since.last_batch else " (the first validation)"
    edge = _next_edge(since, ids, q, expected=expected, kafka=kafka) if ids else None
    if edge is not None:
        edge = replace(edge, version=s.version, state=None if s.ended_by is not None else edge.state)
    return Loaded(inputs=q, span=span, window=ids, edge=edge, more=s.ended_by is not None)


def _next_edge(
    since: cursor.Cursor, ids: list[int], q: QualityInputs, *, expected: Any, kafka: KafkaOutputs | None
) -> cursor.Cursor:
    """Where the next incremental run starts: this window's last batch, positions and expected state."""
    return cursor.Cursor(
        last_batch=ids[-1],
        done=Done(q.factor, q.checkpoints),
        positions=cursor.next_positions(since.positions, q.audit, q.generation_of_batch),
        state=expected,
        kafka_positions=kafka_positions(since.kafka_positions, kafka.records) if kafka else None,
        kafka_edges=kafka.edges if kafka else {},
    )


@dataclass(frozen=True)
class RunReport:
    """Where a run's report went (`files`: its folder, local or on the job's object store) and what its
    summary.json says."""

    files: ReportFiles
    summary: dict[str, Any]

    @property
    def folder(self) -> str:
        return history.folder_of(self.files.location)

    def read_text(self, name: str = "summary.html") -> str:
        return self.files.read_text(name)


@contextmanager
def _built_in(files: ReportFiles) -> Iterator[Path]:
    """Where a run's report is built: its own folder when that is local, else a scratch folder of this process,
    put on the object store whole once built."""
    if files.local_folder is not None:
        yield files.local_folder
        return
    with tempfile.TemporaryDirectory(prefix="elasticity-quality-") as scratch:
        yield Path(scratch)
        files.put_folder(Path(scratch), "")


def run_quality(
    config: JobConfig,
    store: CheckpointStore,
    inputs: Inputs,
    *,
    from_batch: int | None = None,
    to_batch: int | None = None,
    report_dir: str | os.PathLike[str] | None = None,
    incremental: bool = False,
    run_name: str | None = None,
) -> tuple[QualityResult, RunReport]:
    """Validate and report (to `report_dir`, a folder or URI; default the job's report location); returns the
    result and where the run's report went. An incremental run that passes moves the job's validated edge to
    its last batch. Its window stops at a replay (a new version, `quality.replay_versions`): the batches after are
    validated next, by a run of their own (named `<run>-after-<its edge's batch>`), as long as each passes; the
    result and report returned are the last run's."""
    job = config.job_name
    reports = ReportFiles(str(report_dir) if report_dir else config.report_location)
    stores = load_application(config.app_class, config.inputs).stores
    since = (cursor.load(store, job, stores) or cursor.start()) if incremental else None
    base = name = run_name or time.strftime("%Y%m%dT%H%M%S")
    while True:
        loaded = load_inputs(config, store, inputs, from_batch=from_batch, to_batch=to_batch, since=since)
        result, report = _run(config, store, loaded, reports=reports, name=name, stores=stores)
        if not (loaded.more and result.success and loaded.edge is not None):
            return result, report
        since = loaded.edge
        name = f"{base}-after-{since.last_batch}"


def _run(
    config: JobConfig, store: CheckpointStore, loaded: Loaded, *, reports: ReportFiles, name: str, stores: Mapping[str, Any]
) -> tuple[QualityResult, RunReport]:
    """One run over `loaded`: its suites, report and index line; its edge saved when it passes."""
    job = config.job_name
    q, span, window = loaded.inputs, loaded.span, loaded.window
    folder = path_part(name)
    files = reports.child(f"runs/{folder}")
    metrics = store.metrics(job, limit=200)
    with _built_in(files) as built:
        result = run_suites(q, built, job, run_name=name, window=span)
        summary = {
            "job": job,
            "run": name,
            "window": span,
            "batches": window,
            "success": result.success,
            "finished_ms": int(time.time() * 1000),
            "checks": [asdict(c) for c in result.checks],
        }
        (built / "summary.html").write_text(summary_html(job, result, metrics, f"Run {name}, window: {span}"))
        (built / "summary.json").write_text(json.dumps(summary, indent=2))
    result = replace(result, data_docs=public(files.child("data_docs/index.html").location))
    if loaded.edge is not None and result.success:
        cursor.save(store, job, loaded.edge, stores)
    history.record_run(store, job, summary, files)
    history.expire_runs(store, job, reports, keep=config.quality_retain_runs, keep_failed=config.quality_retain_failed_runs)
    reports.write_text("summary.json", json.dumps({**summary, "folder": f"runs/{folder}"}, indent=2))
    write_index(reports, store, job, metrics)
    return result, RunReport(files, summary)


def _declared_lost(store: CheckpointStore, job: str, ids: list[int]) -> pd.DataFrame:
    """The ranges the window's batches declared lost, from their metrics (the batch summary's `lost`)."""
    rows = []
    if ids:
        for m in store.metrics(job, limit=ids[-1] - ids[0] + 1, before=ids[-1] + 1):
            if m.get("batch_id") in ids:
                rows += [{"batch_id": m["batch_id"], **r} for r in m.get("lost", ())]
    return pd.DataFrame(rows, columns=None if rows else LOST_COLUMNS).reindex(columns=LOST_COLUMNS)
