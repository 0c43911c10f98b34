"""The factor a job needs, in one step, from its own measurements: DS2's model (Kalavri et al., "Three steps
is all you need", OSDI'18) on virtual tasks, bounded by what a factor can give here. Pure.

DS2 sizes an operator by its *true* processing rate, records over the time it was busy (not over wall time,
which counts waiting), and asks for the parallelism whose true capacity covers the rate records arrive at.
The Flink Kubernetes operator's autoscaler adds a target utilisation (headroom), a backlog to catch up
within a time, and a scalability coefficient fitted from past rescales for jobs that do not scale linearly.
Here one virtual task is DS2's operator instance and the factor its parallelism, with two bounds that
scaling does not lift:

- per-key order: one key's records stay in one virtual task, one after another, so a batch lasts at least
  as long as its busiest task. Where that task takes a share s of the batch's records, no more than 1/s
  tasks' worth of work runs side by side: the "slowest task" limit `bench/vtask_bench.py` reports ("of what
  per-key order allows") and `make demo` prints as orders per order of each batch's busiest task. That share
  at factors the job does not run is counted, not guessed: the reads of an autosized job count every factor
  in [min, max]'s key buckets (`batch.container.bucket_load`), so the share is the busiest bucket's of the
  records the job read (a model of it carries measured task shares elsewhere, `share`);
- the threads: at most `job.container.thread.pool.size` slices run at once in a process slot (one, with no
  pool), and the process slots (containers x processes) at most as many at once as the executor slots.

and one that a micro-batch adds: each batch spends time outside its tasks' slices (its plan, the read, Spark's
scheduling, the checkpoints, the commit), whatever the factor. A full batch of N records (`batch.max.records`)
takes that overhead o plus its process stage, so no factor gives more than N / o, and a factor's gain shrinks as
its process stage nears o (Spark Structured Streaming's micro-batches alike).

Capacity at factor F, records/s:

    ideal(F)      = r * min(1 / share(F), threads)         r: the true rate of one virtual task
    processing(F) = ideal(Fc) * g(ideal(F) / ideal(Fc))    Fc: the current factor
    g(x)          = 1 + a * (x - 1) for x >= 1, else x     a: the scalability coefficient, in [0, 1]
    capacity(F)   = N / (o + N / processing(F))            N, o: a full batch's records and its overhead
                                                           (without a batch size: processing(F))

A gain is discounted by `a`; a loss is taken whole, so a scale-down is never predicted cheaper than linear
(the operator's users saw over-eager scale-downs). The needed factor is the smallest in [min, max] whose
capacity covers (input rate + records behind / catch-up time) / target utilisation; where none does, the
*useful* factor, the smallest with the most capacity. A scale-down also waits until the load uses less than
`down_below` of the current factor's capacity (the operator's utilisation boundary): the factor a backlog raised
is not taken back while the input alone still keeps it well used, so a step is not followed by a reversal (a
current factor that does not cover the load at all, where a count made a smaller one faster, does not wait).

Invariants (tests/unit/test_ds2.py checks them as properties): where no factor is counted, share(F) is
non-increasing and ideal(F), processing(F) and capacity(F) non-decreasing in F (a count can make factor 4 worse
than 3); capacity(F) never above processing(F) nor N / o; the needed factor is non-decreasing in the input rate
and in the records behind, never above the useful factor, and covers the demand whenever some factor in
[min, max] does; a decision stays in [min, max] and never scales down while the records behind exceed the lag
target.

Worked example (the demo app: a 20 ms lookup per record, 4 input partitions, a pool of 256 threads in one
process slot on 2 executor slots). At factor 2 the tasks' busy time gives r = 50 records/s and the busiest
of the 8 tasks took 15 % of each batch: ideal(2) = 50 * min(1 / 0.15, 256) = 333 records/s. Records arrive
at 800/s with 12,000 behind, to catch up within the default 300 s at 70 % utilisation: (800 + 12,000 / 300) /
0.7 = 1,200 records/s. The busiest task holds 2.5 points above an even 12.5 %, what 832 independent units
(`units_of`) give; carried along that curve, the busiest of 32 tasks at factor 8 holds 4.7 % (the split rule
alone: 15 / 4 = 3.75 %), ideal(8) = 1,055 records/s, and the needed factor is 10 (1,253 records/s). DS2's
linear ratio, 2 * 1,200 / 333 = 7.2, would take a second step. If one key holds 5 % of the records, no factor
gives more than 50 / 0.05 = 1,000 records/s, reached at F = 8: the useful factor, and the decision, is 8, not
the maximum. If past rescales fitted a = 0.8, the gain is discounted: factor 12 (1,217 records/s). Batches of
3,000 records with 0.75 s outside their process stage: capacity(F) = 3,000 / (0.75 + 3,000 / ideal(F)), factor 8
gives 835 records/s and factor 16 is the first over 1,200 (1,231); no factor gives 4,000.

The catch-up time is not the lag target: sized to drain a step's backlog within the lag target (a minute), the
job would run well above what the input alone needs once the backlog is gone, and hold there (the load still
uses more than `down_below` of it). The Flink operator separates them likewise (catch-up duration, 5 minutes).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from elasticity.config import JobConfig

MIN_RESCALES = 2  # rescales needed before the scalability coefficient is fitted (1.0 before)


@dataclass(frozen=True, kw_only=True)
class TaskTimings:
    """One committed batch as the controller reads it: per virtual task, the records of its slice and the
    time it was busy with them (the batch summary's `metrics["records"]` and `metrics["process-ns"]`)."""

    factor: int
    records: Mapping[str, int]
    busy_ns: Mapping[str, int]
    busiest: Mapping[int, int] = field(default_factory=dict)  # per weighed factor, its busiest key bucket's records


@dataclass(frozen=True)
class HighWatermarks:
    """The inputs' high watermarks summed over their partitions, at `at_ms`: records that ever arrived."""

    at_ms: int
    records: int


@dataclass(frozen=True, kw_only=True)
class KeySkew:
    """How unevenly a batch's records fall into virtual tasks: per factor run, the busiest task's share of
    a batch's records, measured; per factor the reads weighed (run or not), the busiest key bucket's share,
    counted, and how much more a task holds than its busiest bucket (`grouping`: 1.0 where a task is a
    partition's bucket); and the hottest single key's share where known (0.0: not known)."""

    shares: Mapping[int, float] = field(default_factory=dict)
    hot_key: float = 0.0
    buckets: Mapping[int, float] = field(default_factory=dict)
    grouping: float = 1.0


@dataclass(frozen=True, kw_only=True)
class Limits:
    """What bounds the virtual tasks running at once, whatever the factor."""

    tasks_per_factor: int  # virtual tasks at factor 1 (the grouper's tasks): factor F runs F times as many
    pool: int  # job.container.thread.pool.size: slices at once per process slot (0: one after another)
    process_slots: int  # job.container.count x job.container.process.count
    executor_slots: int  # Spark's cores for the job: process slots beyond them wait

    @property
    def threads(self) -> int:
        return max(1, self.pool) * max(1, min(self.process_slots, self.executor_slots))


@dataclass(frozen=True, kw_only=True)
class BatchCycle:
    """A full batch's records (`batch.max.records`; 0: unbounded, the overhead spread over any number) and
    the time a batch spends outside its process stage, measured at the current factor."""

    records: int = 0
    overhead_s: float = 0.0


@dataclass(frozen=True, kw_only=True)
class Model:
    """The capacity model of one job at its current factor (the module's docstring has the formula)."""

    current: int
    task_rate: float  # records per busy second of one virtual task
    skew: KeySkew
    limits: Limits
    scalability: float = 1.0  # the fitted coefficient a, in [0, 1]: 1.0 is linear
    cycle: BatchCycle = BatchCycle()


@dataclass(frozen=True)
class Rescaled:
    """One past rescale, measured: the job's throughput (records per second of the process stage, while a
    backlog kept it busy) at the factor before and the factor after."""

    before_factor: int
    after_factor: int
    before_rate: float
    after_rate: float


@dataclass(frozen=True, kw_only=True)
class Policy:
    """The controller's knobs (`job.elasticity.autosize.*`)."""

    min_factor: int = 1
    max_factor: int = 16
    utilization: float = 0.7  # target utilisation of the predicted capacity (DS2's and the operator's headroom)
    catch_up_s: float = 300.0  # the backlog is to be drained within this, beside the input
    target_lag_s: float = 60.0  # more than this much input behind is lag above target
    up_cooldown_ms: int = 120_000  # after any change, a scale-up waits this long
    down_cooldown_ms: int = 600_000  # after any change, a scale-down waits this long
    # a scale-down only while the load uses less than this share of the current factor's predicted capacity (the
    # Flink operator's utilisation boundary): a factor a passing backlog raised is kept while it is still well used
    down_below: float = 0.4

    def __post_init__(self) -> None:
        if not (
            1 <= self.min_factor <= self.max_factor
            and 0 < self.utilization <= 1
            and self.catch_up_s > 0
            and self.target_lag_s > 0
        ):
            raise ValueError(f"expected 1 <= min <= max, 0 < utilization <= 1, catch_up_s > 0 and target_lag_s > 0: {self}")


@dataclass(frozen=True, kw_only=True)
class Load:
    """What the job faces now."""

    input_rate: float  # records arriving per second
    behind: int  # records left to process, each once: the exact count of batch.coordinator.behind
    now_ms: int
    last_change_ms: int  # when the current generation was written


@dataclass(frozen=True, kw_only=True)
class Decision:
    """What the controller wants and why, with what it decided from: `capacity` is the prediction curve
    (records/s per factor in [min, max]) beside the `demand` it had to cover."""

    factor: int  # the factor to run at: the current one to hold
    needed: int  # what the load needs, before the cool-downs and the lag rule
    useful: int  # past it more factor gives nothing (per-key order, the threads)
    demand: float  # records/s to cover: (input rate + behind / catch-up time) / utilisation
    capacity: tuple[tuple[int, float], ...]
    reason: str


def timings(metrics: Iterable[Mapping[str, Any]]) -> list[TaskTimings]:
    """The per-task figures of the store's batch metrics (`CheckpointStore.metrics`), batches that ran a task."""
    out = []
    for m in metrics:
        per_task = m.get("metrics", {})
        if per_task.get("records"):
            out.append(
                TaskTimings(
                    factor=m["factor"],
                    records=per_task["records"],
                    busy_ns=per_task.get("process-ns", {}),
                    busiest={int(f): n for f, n in per_task.get("busiest-bucket-records", {}).items()},
                )
            )
    return out


def true_rate(batches: Iterable[TaskTimings]) -> float | None:
    """Records per busy second of one virtual task, over every task and batch (DS2's true processing rate);
    None when no task was busy."""
    records = busy = 0
    for b in batches:
        for task, n in b.records.items():
            ns = b.busy_ns.get(task, 0)
            if n and ns > 0:
                records, busy = records + n, busy + ns
    return records / (busy / 1e9) if busy else None


def measured_skew(batches: Iterable[TaskTimings], hot_key: float = 0.0) -> KeySkew:
    """Per factor, the busiest virtual task's share of the batches' records, and per weighed factor the busiest
    key bucket's (`TaskTimings.busiest`): the sum of each batch's busiest over the sum of their records, so a
    large batch weighs as much as its records. Only the batches nearest full count (`_near_full`): the busiest
    of a small batch's buckets holds more by chance, and a capacity is what full batches give."""
    batches = [b for b in batches if sum(b.records.values()) > 0]
    shares = {}
    for f in {b.factor for b in batches}:
        run = _near_full([b for b in batches if b.factor == f])
        shares[f] = sum(max(b.records.values()) for b in run) / sum(sum(b.records.values()) for b in run)
    counted = _near_full([b for b in batches if b.busiest])
    total = sum(sum(b.records.values()) for b in counted)
    factors = {f for b in counted for f in b.busiest}
    buckets = {f: sum(b.busiest.get(f, 0) for b in counted) / total for f in factors} if total else {}
    at_run = [(max(b.records.values()), b.busiest[b.factor]) for b in counted if b.busiest.get(b.factor)]
    grouping = max(1.0, sum(t for t, _ in at_run) / sum(k for _, k in at_run)) if at_run else 1.0
    return KeySkew(shares=shares, hot_key=hot_key, buckets=buckets, grouping=grouping)


def _near_full(batches: Sequence[TaskTimings]) -> list[TaskTimings]:
    """The batches with at least half the records of the largest."""
    largest = max((sum(b.records.values()) for b in batches), default=0)
    return [b for b in batches if 2 * sum(b.records.values()) >= largest]


def batch_overhead_s(summaries: Iterable[Mapping[str, Any]]) -> float:
    """The median time of a batch outside its process stage (`durations_ms`: total less process), over the
    batches that processed records; 0.0 without one."""
    spans = sorted(
        max(0.0, d["total"] - d.get("process", 0.0)) / 1000
        for m in summaries
        if m.get("kept", m.get("records_read", 0)) > 0 and "total" in (d := m.get("durations_ms", {}))
    )
    return spans[len(spans) // 2] if spans else 0.0


def input_rate(watermarks: Sequence[HighWatermarks]) -> float | None:
    """Records arriving per second between the first and the last reading (None: under two readings apart in
    time). A high watermark that went down (a topic recreated) counts as no arrival."""
    if len(watermarks) < 2 or watermarks[-1].at_ms <= watermarks[0].at_ms:
        return None
    return max(0, watermarks[-1].records - watermarks[0].records) / ((watermarks[-1].at_ms - watermarks[0].at_ms) / 1000)


def share(skew: KeySkew, factor: int, tasks_per_factor: int) -> float:
    """The busiest virtual task's share of a batch at `factor`. At a factor the reads weighed, counted: its
    busiest key bucket's share times the grouping. Elsewhere, what the task shares measured predict: the
    busiest of B buckets holds more above the mean the more buckets there are (`expected_busiest`), so each
    measured share is carried to B buckets along that curve, calibrated by the share itself (`units_of`: how
    many independent units, keys' records, it implies), and never below the split rule (a bucket at F splits
    into k at k*F, the busiest part at least 1/k of it); that prediction is non-increasing in F, a count need
    not be (factor 4's busiest bucket can hold more than factor 3's). Never below the hottest key's share nor
    an even spread over the tasks."""
    buckets = tasks_per_factor * factor
    floor = max(skew.hot_key, 1 / buckets)
    if factor in skew.buckets:
        return min(1.0, max(floor, skew.buckets[factor] * skew.grouping))
    split = [s * min(1.0, m / factor) for m, s in skew.shares.items()]
    spread = [expected_busiest(buckets, u) for m, s in skew.shares.items() if (u := units_of(s, tasks_per_factor * m))]
    return min(1.0, max([floor, *split, *spread]))


def expected_busiest(buckets: int, units: float) -> float:
    """The busiest bucket's expected share when `units` independent units fall into `buckets` at random: the
    mean 1/B and the largest of B counts' excess over it, sqrt(2 ln B / (U B)) (the maximum of B near-normal
    counts). At most 1; non-increasing in B (it rises from B = 1 only above 1, where it is capped)."""
    if buckets <= 1:
        return 1.0
    return min(1.0, 1 / buckets + math.sqrt(2 * math.log(buckets) / (units * buckets)))


def units_of(busiest: float, buckets: int) -> float | None:
    """The independent units a measured busiest share over `buckets` implies (`expected_busiest` solved for U):
    fewer keys, or a few popular ones, show as fewer units. None where the share says nothing of it: one
    bucket, or no excess over an even spread."""
    excess = busiest - 1 / buckets
    if buckets <= 1 or excess <= 0:
        return None
    return 2 * math.log(buckets) / (buckets * excess**2)


def ideal(model: Model, factor: int) -> float:
    """Records/s at `factor` if every task ran at the true rate: the busiest task bounds a batch (per-key
    order), the threads bound the tasks at once."""
    useful_tasks = min(1 / share(model.skew, factor, model.limits.tasks_per_factor), model.limits.threads)
    return model.task_rate * useful_tasks


def processing(model: Model, factor: int) -> float:
    """Records/s of the process stage at `factor`: the ideal gain over the current factor, discounted by the
    scalability coefficient; a loss taken whole."""
    base = ideal(model, model.current)
    if base <= 0:
        return 0.0
    x = ideal(model, factor) / base
    return base * (1 + model.scalability * (x - 1) if x >= 1 else x)


def capacity(model: Model, factor: int) -> float:
    """The predicted records/s at `factor`: full batches, each its overhead and then its process stage."""
    rate = processing(model, factor)
    n, overhead = model.cycle.records, model.cycle.overhead_s
    if rate <= 0 or n <= 0 or overhead <= 0:
        return rate
    return n / (overhead + n / rate)


def useful_factor(model: Model, lo: int, hi: int) -> int:
    """The smallest factor in [lo, hi] with the most capacity: more gives nothing."""
    best = max(capacity(model, f) for f in range(lo, hi + 1))
    return next(f for f in range(lo, hi + 1) if capacity(model, f) >= best)


def needed_factor(model: Model, demand: float, lo: int, hi: int) -> int:
    """The smallest factor in [lo, hi] whose capacity covers `demand` records/s; the useful factor when none
    does."""
    return next((f for f in range(lo, hi + 1) if capacity(model, f) >= demand), useful_factor(model, lo, hi))


def fit_scalability(rescales: Iterable[Rescaled], model: Model, min_rescales: int = MIN_RESCALES) -> float:
    """How much of the gain the model predicts the job's rescales delivered: a least-squares slope through
    the origin of the observed gain (y - 1) on the predicted one (x - 1), each rescale read from its lower
    factor to its higher (the Flink operator's observed scalability, fitted on the model's ideal ratio rather
    than the parallelism's, so that per-key order and the threads are not counted twice, and on the process
    stage's rates, so that the batches' overhead is not either). Within [0, 1]
    (never more than linear: conservative, as the operator is), 1.0 until `min_rescales` rescales changed
    the ideal capacity."""
    num = den = 0.0
    seen = 0
    for r in rescales:
        (lo_f, lo_r), (hi_f, hi_r) = sorted([(r.before_factor, r.before_rate), (r.after_factor, r.after_rate)])
        lo_ideal = ideal(model, lo_f)
        if lo_r <= 0 or lo_ideal <= 0:
            continue
        x = ideal(model, hi_f) / lo_ideal
        if x <= 1:
            continue
        num, den, seen = num + (x - 1) * (hi_r / lo_r - 1), den + (x - 1) ** 2, seen + 1
    if seen < min_rescales or den <= 0:
        return 1.0
    return min(1.0, max(0.0, num / den))


def demand(load: Load, policy: Policy) -> float:
    """Records/s the job must be able to take: the input and the backlog over the catch-up time, at the
    target utilisation."""
    return (max(0.0, load.input_rate) + max(0, load.behind) / policy.catch_up_s) / policy.utilization


def lag_above_target(load: Load, policy: Policy) -> bool:
    """More records behind than the lag target's worth of input: the job is not keeping up."""
    return load.behind > max(0.0, load.input_rate) * policy.target_lag_s


def decide_factor(model: Model, load: Load, policy: Policy) -> Decision:
    """The factor to run at: the needed factor, within [min, max], unless a cool-down holds or the lag is
    above target (no scale-down then: a backlog is drained, not re-planned)."""
    lo, hi = policy.min_factor, policy.max_factor
    need = demand(load, policy)
    curve = tuple((f, capacity(model, f)) for f in range(lo, hi + 1))
    needed, useful = needed_factor(model, need, lo, hi), useful_factor(model, lo, hi)
    current = model.current

    def decision(factor: int, reason: str) -> Decision:
        return Decision(factor=factor, needed=needed, useful=useful, demand=need, capacity=curve, reason=reason)

    if not lo <= current <= hi:  # the bounds first; above them, no further down than they ask while lag is above target
        to = hi if current > hi and lag_above_target(load, policy) else needed
        return decision(to, f"factor {current} is outside [{lo}, {hi}]: need {needed}")
    covers = f"capacity {capacity(model, needed):,.0f}/s covers {need:,.0f}/s" if capacity(model, needed) >= need else ""
    why = covers or f"no factor covers {need:,.0f}/s: {useful} gives the most, {capacity(model, useful):,.0f}/s"
    since = load.now_ms - load.last_change_ms
    if needed > current:
        if since < policy.up_cooldown_ms:
            return decision(current, f"need {needed} ({why}); scale-up cool-down: last change {since / 1000:.0f}s ago")
        return decision(needed, f"need {needed}: {why}")
    if needed < current:
        if lag_above_target(load, policy):
            return decision(current, f"need {needed}, but {load.behind:,} records behind are above target: holding")
        now_capacity = capacity(model, current)
        used = need * policy.utilization / now_capacity if now_capacity > 0 else 0.0
        # held while the current factor covers the load and is well used; one that does not cover it (a count
        # can make a smaller factor faster) gives way to the smaller one that does
        if used >= policy.down_below and now_capacity >= need:
            return decision(
                current,
                f"need {needed}, but the load uses {used:.0%} of factor {current}'s capacity "
                f"(a scale-down below {policy.down_below:.0%}): holding",
            )
        if since < policy.down_cooldown_ms:
            return decision(current, f"need {needed} ({why}); scale-down cool-down: last change {since / 1000:.0f}s ago")
        return decision(needed, f"need {needed}: {why}")
    return decision(current, f"need {needed}: {why}: holding")


def policy_of(config: JobConfig) -> Policy:
    """The controller's knobs as the job configures them (`job.elasticity.autosize.*`); the single
    `cooldown.ms` of earlier versions is the scale-down cool-down where `scale.down.cooldown.ms` is not set."""
    written = dict(config.raw)
    down = config.autosize_scale_down_cooldown_ms
    if "job.elasticity.autosize.scale.down.cooldown.ms" not in written and "job.elasticity.autosize.cooldown.ms" in written:
        down = config.autosize_cooldown_ms
    return Policy(
        min_factor=config.autosize_min,
        max_factor=config.autosize_max,
        utilization=config.autosize_utilization_target,
        catch_up_s=float(config.autosize_catch_up_s),
        target_lag_s=float(config.autosize_target_lag_s),
        up_cooldown_ms=config.autosize_scale_up_cooldown_ms,
        down_cooldown_ms=down,
        down_below=config.autosize_scale_down_utilization,
    )
