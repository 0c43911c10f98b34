"""What the job page shows, gathered once per request from the store and the
brokers: the job model with each virtual task's
checkpoint and live lag, recent batches, rescales, the scale policy, the last
data-quality runs, and the dry run of a rescale. Plain data, also served as
JSON; no Airflow here, so it is built the same way in a benchmark."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from elasticity.batch.coordinator.job_coordinator import Inputs, JobCoordinator
from elasticity.batch.coordinator.lag import lag_report
from elasticity.checkpoint.store import CheckpointStore
from elasticity.checkpoint.task_checkpoint import TaskCheckpoint
from elasticity.config import JobConfig
from elasticity.jobmodel.object_mapper import ssp_to_key
from elasticity.metrics.freshness import HOUR_MS, FreshnessWindow, window
from elasticity.metrics.rates import task_rates
from elasticity.quality.history import run_page
from elasticity.scaling.decision import AutosizeRecord

if TYPE_CHECKING:
    from elasticity.state.state_move import StateMove

BATCHES = 50  # recent batches charted
MAX_BATCHES = 1000  # the most batches one page may ask for
QUALITY_RUNS = 10  # data-quality runs listed
FAILURES = 20  # failed task attempts listed
RESCALES = 50  # generations listed


@dataclass(frozen=True)
class SspkbRow:
    sspkb: str
    offset: int  # the checkpoint: next offset to process
    lag: int | None  # None: the broker did not answer
    watermarks: int = 0  # ranges below this offset already processed by other buckets (left by a merge)


@dataclass(frozen=True)
class StoreRow:
    """One store of one virtual task: where its committed state lives and how big it was last seen."""

    store: str
    markers: dict[str, str]  # backup factory -> state marker in the task's CheckpointV2
    disk_bytes: int | None  # local RocksDB size at the latest batch that touched it (None: not seen yet)


@dataclass(frozen=True, kw_only=True)
class TaskRow:
    task: str
    container: str
    sspkbs: tuple[SspkbRow, ...]
    rate: float | None  # records/s of its own processing time in the latest batch where it had records
    stores: tuple[StoreRow, ...] = ()


@dataclass(frozen=True)
class ScheduleRuleView:
    cron: str
    factor: int
    next_ms: int  # when the rule fires next


@dataclass(frozen=True, kw_only=True)
class PolicyView:
    """The active scale policy and what it does next."""

    kind: str  # schedule | autosize | none
    wants: int | None  # the factor the schedule or autosizer asks for now
    reason: str
    next_step: str  # in words: what the next elastic_scale_schedule run will do
    rules: tuple[ScheduleRuleView, ...] = ()
    # autosizer: min, max, up_cooldown_ms, down_cooldown_ms, target_lag_s, catch_up_s, utilization, confirm_ms
    bounds: dict[str, float] = field(default_factory=dict)
    hold_factor: int | None = None
    hold_until_ms: int | None = None
    hold_reason: str = ""
    autosize: AutosizeRecord | None = None  # the autosizer's decision now, with its prediction curve
    last_autosize: tuple[int, AutosizeRecord] | None = None  # (generation, record) of its latest rescale


@dataclass(frozen=True)
class EngineHealth:
    """The Spark Connect server (the driver) the job's batches run on, as the page probed it."""

    address: str  # sc://host:port
    reachable: bool
    since_ms: int  # reachable (or not) since then, as seen by the page's probes
    error: str | None = None  # why not, in one line


@dataclass(frozen=True, kw_only=True)
class RunInProgress:
    """The micro-batch DAG's running run: for how long, which attempt, what the last failed attempt said."""

    run_id: str
    started_ms: int
    attempt: int
    expected_s: float  # airflow.microbatch.max.seconds plus the margin a run may take beyond it
    stuck: bool  # running longer than expected_s
    last_error: str | None = None


@dataclass(kw_only=True)
class JobView:
    job: str
    generation: int | None
    factor: int | None
    created_ms: int | None = None  # when the current generation was written
    containers: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # container -> task -> SSPKb keys
    tasks: list[TaskRow] = field(default_factory=list)
    lag_per_sspkb: dict[str, int] = field(
        default_factory=dict
    )  # offsets between each virtual task's checkpoint and its partition's end (SEP-32's lag per SSPKb)
    lag_per_task: dict[str, int] = field(default_factory=dict)
    # the records actually behind, per input partition: its end minus the lowest checkpoint of its buckets
    # (SEP-32's offset lag counts a partition's records once per key bucket: factor times as many); at most that
    # many for a partition whose buckets are apart (records_behind_apart)
    records_behind_per_partition: dict[str, int] = field(default_factory=dict)
    records_behind_apart: list[str] = field(default_factory=list)
    # of the records above those checkpoints, how many were processed already (by a faster bucket, or before a
    # merge: its watermarks), counted by the batches
    records_already_processed: int = 0
    records_behind: int = 0  # the records left to process, each once: the partitions' sum less those already processed
    records_behind_exact: bool = True  # False: the batches' count is unknown, and records_behind is an upper bound
    lag_error: str | None = None  # why the live lag is unknown (broker down): never an older generation's figures instead
    freshness: FreshnessWindow | None = None  # p50/p99 over the batches committed in the last hour (None: none had records)
    batches: list[dict[str, Any]] = field(default_factory=list)  # BatchSummary JSON of recent batches, oldest first
    rescales: list[dict[str, Any]] = field(default_factory=list)
    policy: PolicyView | None = None
    quality: dict[str, Any] | None = None  # the latest data-quality run
    quality_runs: list[dict[str, Any]] = field(default_factory=list)  # newest first
    before: int | None = None  # the page of batches shown: those below this batch id (None: the latest)
    older_batches: int | None = None  # `before` that asks for the page of older batches (None: no older one)
    runs_before: int | None = None  # the page of data-quality runs shown: those below this run (None: the latest)
    older_runs: int | None = None  # `runs_before` that asks for older data-quality runs (None: no older one)
    engine: EngineHealth | None = None  # None: not probed (no Spark Connect server, or not inside Airflow)
    run: RunInProgress | None = None
    # the latest failed task attempts of any run (run_id, attempt, task, error, created_ms), newest first, whichever
    # worker ran them
    failures: list[dict[str, Any]] = field(default_factory=list)

    @property
    def total_lag(self) -> int:
        return sum(self.lag_per_task.values())


def build_view(
    config: JobConfig,
    store: CheckpointStore,
    inputs: Inputs,
    policy: PolicyView | None = None,
    *,
    limit: int = BATCHES,
    before: int | None = None,
    runs_before: int | None = None,
    now_ms: int | None = None,
) -> JobView:
    """The page's data; its histories are pages (`limit` batches below batch `before`, the data-quality runs below
    run `runs_before`; None: the latest), so a request reads the same amount whatever the job's age. Freshness
    percentiles are over the hour before `now_ms` (None: now)."""
    coordinator = JobCoordinator(config, store, inputs)
    current = coordinator.current()
    job = config.job_name
    view = JobView(
        job=job, generation=current.number if current else None, factor=current.factor if current else None, policy=policy
    )
    view.before, view.runs_before = before, runs_before
    runs = run_page(store, job, limit=QUALITY_RUNS, before=runs_before)
    view.quality_runs, view.older_runs = list(runs.runs), runs.older
    latest = view.quality_runs if runs_before is None else list(run_page(store, job, limit=1).runs)
    view.quality = latest[0] if latest else None
    view.failures = [asdict(f) for f in store.failures(job, limit=FAILURES)]
    if current is None:
        return view
    view.created_ms = current.created_ms
    limit = min(max(1, limit), MAX_BATCHES)
    view.batches = store.metrics(job, limit=limit, before=before)
    view.older_batches = view.batches[0]["batch_id"] if len(view.batches) == limit else None
    recent = view.batches if before is None else store.metrics(job, limit=BATCHES)
    view.freshness = last_hour_freshness(store, job, now_ms)
    try:  # the current model's checkpoints against fresh high watermarks
        report = lag_report(config, store, inputs)
    except (ConnectionError, OSError, RuntimeError) as e:
        view.lag_error = str(e)
    else:
        view.lag_per_sspkb, view.records_behind_per_partition = report.per_sspkb, report.per_ssp
        view.records_behind_apart, view.records_already_processed = list(report.apart), report.done_ahead
        view.records_behind, view.records_behind_exact = report.total, report.exact
    rates: dict[str, float] = {}
    sizes: dict[tuple[str, str], int] = {}
    for m in recent:  # the latest rate of each task that had records, the latest size of each store
        rates.update(task_rates(m))
        for task, stores in m["metrics"].get("stores", {}).items():
            sizes.update({(task, s): v["disk-usage-bytes"] for s, v in stores.items() if "disk-usage-bytes" in v})
    cps = coordinator.checkpoints(current)
    for c in current.job_model.containers:
        view.containers[c.processor_id] = {}
        for t in c.tasks:
            _add_task(view, c.processor_id, cps[t.task_name], rate=rates.get(t.task_name.name), sizes=sizes)
    view.rescales = _history(store, job)
    return view


def _history(store: CheckpointStore, job: str) -> list[dict[str, Any]]:
    """The latest generations, oldest first: rescales and replays alike."""
    return [
        {
            "generation": g.number,
            "factor": g.factor,
            "reason": g.reason,
            "created_ms": g.created_ms,
            "origin": g.origin,
            **({"replay": _replay_row(g.replay)} if g.replay else {}),
        }
        for g in store.generations(job, limit=RESCALES)
    ]


def _replay_row(text: str) -> dict[str, Any]:
    """A replay's generation as the history shows it: from when, the output mode, where each partition starts."""
    from elasticity.checkpoint.replay import Replay

    r = Replay.from_json(text)
    return {
        "from": r.requested.describe(),
        "from_ms": r.requested.timestamp_ms,
        "outputs": str(r.outputs),
        "starts": {f"{s.system}.{s.stream}.{s.partition}": o for s, o in r.starts.items()},
    }


def _add_task(
    view: JobView, container: str, cp: TaskCheckpoint, *, rate: float | None, sizes: dict[tuple[str, str], int]
) -> None:
    """One virtual task's row: its SSPKbs with their lag, its stores with their markers and sizes."""
    name = cp.task_name.name
    lag = view.lag_per_sspkb if not view.lag_error else None
    rows = tuple(
        SspkbRow(ssp_to_key(s), o, lag.get(ssp_to_key(s)) if lag is not None else None, len(cp.watermarks.get(s, ())))
        for s, o in sorted(cp.offsets.items())
    )
    view.containers[container][name] = [r.sspkb for r in rows]
    markers: dict[str, dict[str, str]] = {}
    for factory, by_store in cp.state_markers.items():
        for store_name, marker in by_store.items():
            markers.setdefault(store_name, {})[factory] = marker
    stores = tuple(
        StoreRow(s, markers.get(s, {}), sizes.get((name, s)))
        for s in sorted(markers.keys() | {s for t_, s in sizes if t_ == name})
    )
    view.tasks.append(TaskRow(task=name, container=container, sspkbs=rows, rate=rate, stores=stores))
    view.lag_per_task[name] = sum(r.lag or 0 for r in rows)


def last_hour_freshness(store: CheckpointStore, job: str, now_ms: int | None = None) -> FreshnessWindow | None:
    """Freshness p50/p99 over the batches committed in the hour before `now_ms` (None: now)."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    return window(store.freshness(job, since_ms=now - HOUR_MS))


def metrics_page(store: CheckpointStore, job: str, *, limit: int, before: int | None = None) -> dict[str, Any]:
    """`/api/jobs/<job>/metrics`: a page of the batches' metrics, oldest first (each with its freshness_ms),
    `older` (the `before` of the page before it), and `freshness`: p50/p99 over the last hour."""
    batches = store.metrics(job, limit=limit, before=before)
    last_hour = last_hour_freshness(store, job)
    return {
        "batches": batches,
        "older": batches[0]["batch_id"] if len(batches) == limit else None,
        "freshness": asdict(last_hour) if last_hour else None,
    }


@dataclass(frozen=True, kw_only=True)
class MoveRow:
    new_task: str
    sspkb: str
    offset: int  # where the new task starts
    from_tasks: tuple[str, ...]  # the old tasks whose keys it takes ((): a partition new to the job)
    skipping: tuple[str, ...]  # watermarks "bucket/factor<offset": records below already processed


@dataclass(frozen=True, kw_only=True)
class TransferRow:
    """What one new virtual task's store would receive in the state's move."""

    task: str
    store: str
    from_tasks: tuple[str, ...]
    how: str  # moved | kept (its committed snapshot as it is) | empty (no source committed state)
    keys: int
    bytes: int


@dataclass(frozen=True, kw_only=True)
class StatePreview:
    """The state's dry run: every store snapshot read, counted per new task."""

    keys: int  # moved in all
    bytes: int
    transfers: tuple[TransferRow, ...]


@dataclass(frozen=True, kw_only=True)
class RescalePreview:
    """The dry run of a rescale, as the rescale DAG would apply it now."""

    job: str
    old_factor: int | None
    new_factor: int
    tasks_before: int
    tasks_after: int
    moves: tuple[MoveRow, ...]
    notes: tuple[str, ...]  # new and dropped input partitions
    state: StatePreview | None = None  # None: the state was not scanned (or the app has none)

    @property
    def changes_nothing(self) -> bool:
        return not self.moves


def state_preview(move: StateMove) -> StatePreview:
    rows = tuple(
        TransferRow(
            task=t.task.name,
            store=t.store,
            from_tasks=tuple(s.name for s in t.sources),
            how=t.how,
            keys=t.keys,
            bytes=t.bytes,
        )
        for t in sorted(move.transfers, key=lambda t: (t.task, t.store))
    )
    moved = [r for r in rows if r.how == "moved"]
    return StatePreview(keys=sum(r.keys for r in moved), bytes=sum(r.bytes for r in moved), transfers=rows)


def preview_rescale(
    config: JobConfig, store: CheckpointStore, inputs: Inputs, factor: int, *, state: bool = False
) -> RescalePreview:
    """The migration from the checkpoints alone, cheap whatever the state's size; `state`: also the state's
    dry run, which downloads and scans every store snapshot (keys and bytes each new task would receive)."""
    plan = JobCoordinator(config, store, inputs).plan_rescale(factor, state=state)
    before = len(plan.old.job_model.tasks()) if plan.old else 0
    m = plan.migration
    if m is None:
        return RescalePreview(
            job=config.job_name,
            old_factor=plan.old.factor if plan.old else None,
            new_factor=factor,
            tasks_before=before,
            tasks_after=before,
            moves=(),
            notes=(),
        )
    moves = tuple(
        MoveRow(
            new_task=mv.new_task.name,
            sspkb=ssp_to_key(mv.ssp),
            offset=mv.offset,
            from_tasks=tuple(t.name for t in mv.old_tasks),
            skipping=tuple(f"{w.bucket}/{w.factor}<{w.offset}" for w in mv.watermarks),
        )
        for mv in m.moves
    )
    notes = tuple(
        filter(None, [m.describe_new_ssps()] + [f"input partition no longer read: {ssp_to_key(s)}" for s in m.dropped_ssps])
    )
    return RescalePreview(
        job=config.job_name,
        old_factor=m.old_factor,
        new_factor=m.new_factor,
        tasks_before=before,
        tasks_after=len(m.checkpoints),
        moves=moves,
        notes=notes,
        state=state_preview(plan.state) if plan.state is not None else None,
    )
