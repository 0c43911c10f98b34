"""Task bodies of the DAGs: thin wrappers over the library, run inside Airflow tasks."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from croniter import croniter
from tenacity import RetryCallState, Retrying, retry_if_exception_type, retry_if_not_exception_type, stop_after_delay, wait_fixed

from elasticity.airflow.hooks import connected, job_configs
from elasticity.airflow.shared_state import check_shared_state
from elasticity.batch.coordinator.job_coordinator import JobCoordinator
from elasticity.checkpoint.store import CheckpointStore, LeaseHeldError, StaleGenerationError, SupersededError
from elasticity.checkpoint.store.attempt_token import attempt_owner
from elasticity.checkpoint.store.generation_rows import Generation
from elasticity.checkpoint.store.pool import StorePool
from elasticity.config import JobConfig, load_config
from elasticity.kafka.consumer import KafkaInputs
from elasticity.scaling.decision import AutosizeRecord, Observed, ScaleDecision, decide, manual_hold
from elasticity.scaling.ds2 import policy_of
from elasticity.scaling.schedule import parse_schedule
from elasticity.views.jobview import PolicyView, ScheduleRuleView

log = logging.getLogger(__name__)
LEASE_WAIT_S = 600


def open_job(job: str, stores: StorePool) -> tuple[JobConfig, CheckpointStore, JobCoordinator]:
    """The job's config with the connections it names in force, its store (from `stores`, which closes it)
    and its coordinator."""
    configs = job_configs()
    if job not in configs:
        raise ValueError(f"job {job!r} has no config in the jobs folder; known: {sorted(configs)}")
    config = connected(load_config(configs[job]))
    check_shared_state(config)
    store = stores.get(config.checkpoint_store_url(), config.checkpoint_history_size)
    return config, store, JobCoordinator(config, store, KafkaInputs(config))


def rescale(
    job: str,
    factor: int | None,
    *,
    dry_run: bool,
    owner: str,
    reason: str,
    origin: str = "manual",
    try_number: int | None = None,
    expected_generation: int | None = None,
    lease_wait_s: float = LEASE_WAIT_S,
    decision: str | None = None,
) -> dict[str, Any]:
    """Migrate under the job's lease; a running batch is allowed to finish first (up to `lease_wait_s`, then
    LeaseHeldError). `owner` names the run: the lease is taken under this attempt's token (`attempt_token`), so
    an earlier try still alive is fenced. `expected_generation`, `decision`: see JobCoordinator.rescale."""
    owner = attempt_owner(owner, try_number)
    with StorePool() as stores:
        return _rescale(
            open_job(job, stores)[2],
            factor,
            dry_run=dry_run,
            owner=owner,
            reason=reason,
            origin=origin,
            expected_generation=expected_generation,
            lease_wait_s=lease_wait_s,
            decision=decision,
        )


def _waiting_for_the_batch(store: CheckpointStore, job: str) -> Callable[[RetryCallState], None]:
    """Before each wait for the lease: asks for it, so that a run of batches ends after its batch (not when
    caught up, which a job under more load than its factor can take never is)."""

    def waiting(state: RetryCallState) -> None:
        assert state.outcome is not None
        store.want_lease(job)
        log.info("waiting for the running batch to finish: %s", state.outcome.exception())

    return waiting


def _rescale(
    coordinator: JobCoordinator,
    factor: int | None,
    *,
    dry_run: bool,
    owner: str,
    reason: str,
    origin: str,
    expected_generation: int | None,
    lease_wait_s: float,
    decision: str | None = None,
) -> dict[str, Any]:
    job = coordinator.config.job_name
    old = coordinator.current()
    if dry_run:
        plan = coordinator.plan_rescale(factor)
        log.info("dry run of %s:\n%s", reason, plan.migration.describe() if plan.migration else "nothing to change")
        return {
            "job": job,
            "dry_run": True,
            "applied": False,
            "old_generation": old.number if old else None,
            "new_generation": None,
        }
    plan = Retrying(  # a running batch holds the lease: it is allowed to finish first
        retry=retry_if_exception_type(LeaseHeldError) & retry_if_not_exception_type(SupersededError),
        stop=stop_after_delay(lease_wait_s),
        wait=wait_fixed(2),
        before_sleep=_waiting_for_the_batch(coordinator.store, job),
        reraise=True,
    )(
        coordinator.rescale,
        factor,
        owner=owner,
        trigger=reason,
        origin=origin,
        expected_generation=expected_generation,
        decision=decision,
    )
    if plan.migration is None:
        log.info("%s: already at factor %s, nothing to change", job, plan.factor)
    else:
        log.info("%s (%s):\n%s", job, reason, plan.migration.describe())
    new = coordinator.current()
    return {
        "job": job,
        "dry_run": False,
        "applied": plan.migration is not None,
        "origin": origin,
        "old_generation": old.number if old else None,
        "new_generation": new.number if new else None,
        "old_factor": old.factor if old else None,
        "new_factor": new.factor if new else None,
        "reason": reason,
    }


def replay(
    job: str,
    start: str,
    *,
    outputs: str,
    dry_run: bool,
    owner: str,
    reason: str,
    try_number: int | None = None,
    lease_wait_s: float = LEASE_WAIT_S,
) -> dict[str, Any]:
    """Reprocess `job` from `start` (`earliest`, an ISO 8601 time or epoch ms) as a new generation
    (`batch.coordinator.replayer`): under its lease, taken under this attempt's token, a running batch allowed to
    finish first (up to `lease_wait_s`, then LeaseHeldError); refused (ReplayError) with the reason when the
    stores cannot be rebuilt from the retained input."""
    from elasticity.batch.coordinator.replayer import plan_replay
    from elasticity.batch.coordinator.replayer import replay as apply_replay
    from elasticity.checkpoint.replay import OutputMode, ReplayFrom

    frm, mode = ReplayFrom.parse(start), OutputMode(outputs)
    owner = attempt_owner(owner, try_number)
    with StorePool() as stores:
        coordinator = open_job(job, stores)[2]
        if dry_run:
            plan = plan_replay(coordinator, frm, mode)
        else:
            plan = Retrying(  # a running batch holds the lease: it is allowed to finish first
                retry=retry_if_exception_type(LeaseHeldError) & retry_if_not_exception_type(SupersededError),
                stop=stop_after_delay(lease_wait_s),
                wait=wait_fixed(5),
                before_sleep=_waiting_for_the_batch(coordinator.store, job),
                reraise=True,
            )(apply_replay, coordinator, frm, outputs=mode, reason=reason, owner=owner)
    log.info("%s", plan.describe())
    return {
        "job": job,
        "dry_run": dry_run,
        "applied": plan.new is not None,
        "origin": "replay",
        "from": start,
        "outputs": str(mode),
        "old_generation": plan.old.number,
        "new_generation": plan.new.number if plan.new else None,
        "starts": {f"{s.stream}-{s.partition}": p.offset for s, p in plan.starts.items()},
        "stores": list(plan.stores),
        "refused": list(plan.refused),
        "removed_rows": plan.removed_rows,
        "reason": reason,
    }


def apply_scale_decisions(run_id: str, try_number: int | None = None, *, pause_s: float = 5.0) -> list[str]:
    """Each job's scheduled factor (`job.elasticity.schedule`) applied, job by job and fairly: a job whose lease is
    busy (a batch running) is tried again after the others, every `pause_s`, up to LEASE_WAIT_S in all, so no
    job's batch holds up another job's rescale. A decision the job moved past meanwhile (a person's rescale) is
    dropped; one job's failure does not stop the others' (raised at the end). Returns the data-quality DAGs
    of the jobs rescaled. The autosizer's decisions are not applied here: its loop in the triggerer starts
    elastic_autosize__<job> when one holds (`apply_autosize`)."""
    decisions = {}
    for job in job_configs():
        with StorePool() as stores:
            config, store, coordinator = open_job(job, stores)
            if not config.elasticity_schedule:
                continue
            decisions[job] = decision = scale_decision(config, store, coordinator.current())
        log.info("%s: factor %s, %s", job, decision.current, decision.reason)
    waiting = [job for job, d in decisions.items() if d.applies and d.origin == "schedule"]
    rescaled: list[str] = []
    failed: dict[str, Exception] = {}
    deadline = time.monotonic() + LEASE_WAIT_S
    while waiting:
        busy = []
        for job in waiting:
            d = decisions[job]
            try:
                result = rescale(
                    job,
                    d.factor,
                    dry_run=False,
                    owner=f"schedule:{run_id}",
                    try_number=try_number,
                    reason=f"{d.reason} (elastic_scale_schedule run {run_id})",
                    origin=d.origin,
                    expected_generation=d.generation,
                    lease_wait_s=0,
                )
            except StaleGenerationError as e:
                log.info("%s: not applied, %s", job, e)
            except SupersededError as e:
                failed[job] = e
            except LeaseHeldError as e:
                if time.monotonic() >= deadline:
                    failed[job] = e
                else:
                    busy.append(job)
            except Exception as e:  # noqa: BLE001 - every other job still gets its rescale; raised below
                log.exception("%s: rescale failed", job)
                failed[job] = e
            else:
                if result["applied"]:
                    rescaled.append(f"elastic_data_quality__{job}")
        if busy:
            log.info("busy (a batch holds the lease), tried again in %.0f s: %s", pause_s, busy)
            time.sleep(pause_s)
        waiting = busy
    if failed:
        raise RuntimeError(f"scale decisions not applied: {'; '.join(f'{j}: {e}' for j, e in failed.items())}")
    return rescaled


def apply_autosize(job: str, payloads: list[dict[str, Any]], run_id: str, try_number: int | None = None) -> dict[str, Any]:
    """The autosizer's confirmed decision (the latest of the asset events that started the run) applied through
    the ordinary rescale path, with origin `autosize` and its record kept with the new generation; only while
    the generation it decided on is still current (a person's rescale since: nothing changes)."""
    mine = [p for p in payloads if p.get("job") == job and "factor" in p]
    if not mine:
        log.info("%s: no autosizer decision among the events %s", job, payloads)
        return {"job": job, "applied": False}
    want = max(mine, key=lambda p: (p["generation"], p.get("at_ms", 0)))
    try:
        return rescale(
            job,
            int(want["factor"]),
            dry_run=False,
            owner=f"autosize:{run_id}",
            try_number=try_number,
            reason=f"autosize: {want['reason']} (elastic_autosize__{job} run {run_id})",
            origin="autosize",
            expected_generation=int(want["generation"]),
            decision=want.get("decision"),
        )
    except StaleGenerationError as e:
        log.info("%s: not applied, %s", job, e)
        return {"job": job, "applied": False, "stale": str(e)}


def policy_view(config: JobConfig, store: CheckpointStore, current: Generation, now: datetime | None = None) -> PolicyView:
    """The scale policy as the job page shows it: its rules or bounds, a manual hold, and what comes next."""
    now = now or datetime.now(UTC)
    d = scale_decision(config, store, current, now)
    rules_text = config.elasticity_schedule
    rules = (
        tuple(
            ScheduleRuleView(r.cron, r.factor, int(croniter(r.cron, now).get_next(datetime).timestamp() * 1000))
            for r in parse_schedule(rules_text)
        )
        if rules_text
        else ()
    )
    kind = "schedule" if rules else "autosize" if config.autosize else "none"
    bounds = autosize_bounds(config) if kind == "autosize" else {}
    if d.current is None:
        step = "nothing until the job's first batch"
    elif kind == "none":
        step = "nothing: the factor changes only when someone rescales"
    elif d.hold is not None and d.factor != d.current:
        step = (
            f"keep factor {d.current} while the manual hold lasts, then rescale to {d.factor} unless the policy changes its mind"
        )
    elif d.applies and kind == "autosize":
        step = (
            f"rescale to factor {d.factor} once the autosizer in Airflow's triggerer has wanted it for "
            f"{config.autosize_confirm_ms / 1000:.0f} s (elastic_autosize__{config.job_name})"
        )
    elif d.applies:
        step = f"rescale to factor {d.factor} at the next elastic_scale_schedule run (every 5 minutes)"
    elif rules:
        nxt = min(rules, key=lambda r: r.next_ms)
        step = f"keep factor {d.current}; the next rule ({nxt.cron} -> {nxt.factor}) fires at {_iso(nxt.next_ms)}"
    else:
        step = f"keep factor {d.current}"
    hold = manual_hold(
        store.generations(config.job_name), config.manual_hold_ms, int(now.timestamp() * 1000)
    )  # shown even while the policy agrees with it
    return PolicyView(
        kind=kind,
        wants=d.factor,
        reason=d.reason,
        next_step=step,
        rules=rules,
        bounds=bounds,
        hold_factor=hold.factor if hold else None,
        hold_until_ms=hold.until_ms if hold else None,
        hold_reason=hold.reason if hold else "",
        autosize=d.record,
        last_autosize=last_autosize(store.generations(config.job_name, limit=50)) if kind == "autosize" else None,
    )


def autosize_bounds(config: JobConfig) -> dict[str, float]:
    """The autosizer's knobs as the job page shows them."""
    p = policy_of(config)
    return {
        "min": p.min_factor,
        "max": p.max_factor,
        "up_cooldown_ms": p.up_cooldown_ms,
        "down_cooldown_ms": p.down_cooldown_ms,
        "target_lag_s": p.target_lag_s,
        "catch_up_s": p.catch_up_s,
        "utilization": p.utilization,
        "confirm_ms": config.autosize_confirm_ms,
    }


def last_autosize(generations: list[Generation]) -> tuple[int, AutosizeRecord] | None:
    """The latest rescale the autosizer made, with the record of its decision: (generation, record)."""
    made = [g for g in generations if g.origin == "autosize" and g.decision]
    if not made:
        return None
    g = max(made, key=lambda g: g.number)
    return g.number, AutosizeRecord.from_json(g.decision or "")


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="minutes")


def scale_decision(
    config: JobConfig,
    store: CheckpointStore,
    current: Generation | None,
    now: datetime | None = None,
    *,
    observed: Observed | None = None,
) -> ScaleDecision:
    """What the scale policy wants for the job now (elastic_scale_schedule applies a schedule's, the
    autosizer's loop in the triggerer its own)."""
    return decide(config, store, current, now or datetime.now(UTC), observed=observed)


def quality(
    job: str, from_batch: int | None, to_batch: int | None, *, report_dir: str | None, run_name: str | None = None
) -> dict[str, Any]:
    """Incremental (the batches since the last validated one) unless a window is given."""
    from elasticity.quality.report_files import public
    from elasticity.quality.runner import QualityFailed, run_quality

    with StorePool() as stores:
        config, store, coordinator = open_job(job, stores)
        result, report = run_quality(
            config,
            store,
            coordinator.inputs,
            from_batch=from_batch,
            to_batch=to_batch,
            report_dir=report_dir,
            incremental=from_batch is None and to_batch is None,
            run_name=run_name,
        )
    window = report.summary["window"]
    where = public(report.files.child("summary.html").location)
    log.info(
        "data quality of %s (%s): %s\nreport: %s\ndata docs: %s",
        job,
        window,
        "PASSED" if result.success else "FAILED",
        where,
        result.data_docs,
    )
    for c in result.checks:
        log.info(
            "%-13s %s  rows=%d unexpected=%d %s",
            c.name,
            "PASS" if c.success else "FAIL",
            c.rows,
            c.unexpected,
            ", ".join(c.examples[:5]),
        )
    if not result.success:
        raise QualityFailed(f"data quality of {job} failed: {result.failure_message()} (report: {where})")
    return {
        "job": job,
        "window": window,
        "report": where,
        "data_docs": result.data_docs,
        "checks": report.summary["checks"],
    }


def maintenance(job: str, now: datetime | None = None) -> dict[str, Any]:
    """The job's retention (`elasticity.maintenance.maintain`); returns what each step removed (a few counts)."""
    from elasticity.maintenance import maintain

    with StorePool() as stores:
        config, store, _ = open_job(job, stores)
        report = maintain(config, store, now_ms=int((now or datetime.now(UTC)).timestamp() * 1000))
    log.info("%s", report.line())
    return asdict(report)
