"""The records behind: never fewer than the records left to process, counted one by one over a generated
keyed log through generated batches (tasks stopping early), splits and merges and new partitions; equal to
them while the batches' count holds; SEP-32's figure (end minus the slowest task) while no task is apart."""

import json
import re

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from elasticity.batch.coordinator.behind import DoneAhead, after_batch, apart, carried, recorded
from elasticity.batch.coordinator.job_coordinator import JobCoordinator
from elasticity.batch.coordinator.lag import lag_report
from elasticity.checkpoint.store import CheckpointStore
from elasticity.checkpoint.task_checkpoint import TaskCheckpoint, Watermark
from elasticity.config import validate
from elasticity.jobmodel.model import SystemStream, SystemStreamPartition, TaskName
from elasticity.metrics.summary import BatchSummary
from tests.support.examples import examples
from tests.support.memory import MemoryInputs, ReferenceRunner

P0 = SystemStreamPartition("kafka", "orders", 0)


def cp(name, offsets, watermarks=None):
    return TaskCheckpoint(
        task_name=TaskName(name),
        offsets={P0.with_key_bucket(b): o for b, o in offsets.items()},
        watermarks={P0.with_key_bucket(b): w for b, w in (watermarks or {}).items()},
    )


def left_to_process(runner: ReferenceRunner) -> int:
    """The truth, one record at a time: records of the job's partitions that no batch processed."""
    current = runner.coordinator.current()
    if current is None:
        return 0
    cps = runner.coordinator.checkpoints(current).values()
    known = {s.without_key_bucket() for c in cps for s in c.offsets}
    done = {(p.ssp, p.offset) for p in runner.log}
    return sum((ssp, o) not in done for ssp in known for o in range(len(runner.inputs.topics[ssp.system_stream][ssp.partition])))


ORDERS = SystemStream("kafka", "orders")
KEYS = st.one_of(st.none(), st.sampled_from([b"a", b"b", b"c", b"d", b"hot", b"k1", b"k2", b"k3", b"k4", b""]))
FACTORS = st.sampled_from([1, 2, 3, 4, 6, 8, 12])  # splits, merges and the changes in between


class RecordsBehindMachine(RuleBasedStateMachine):
    """A keyed stream through batches whose slow tasks stop early (their siblings run ahead), splits, merges
    and new partitions, on the reference runner (the real planner, routing, migration and store); the real lag
    probe checked against the records left, counted one by one, after every step."""

    @initialize(partitions=st.integers(1, 2), factor=FACTORS)
    def setup(self, partitions, factor):
        self.inputs = MemoryInputs()
        self.inputs.create(ORDERS, partitions)
        config = validate({"job.name": "behind", "task.inputs": str(ORDERS), "job.elasticity.factor": str(factor)})
        self.store = CheckpointStore("sqlite://")
        self.runner = ReferenceRunner(JobCoordinator(config, self.store, self.inputs), self.inputs)
        self.runner.coordinator.initialize()

    def teardown(self):
        if hasattr(self, "store"):
            self.store.close()

    @rule(keys=st.lists(KEYS, min_size=1, max_size=30))
    def produce(self, keys):
        for i, key in enumerate(keys):
            self.inputs.produce(ORDERS, key, b"v%d" % i)

    @rule(
        max_records=st.integers(1, 40),
        budgets=st.lists(st.integers(0, 3) | st.integers(0, 3) | st.none(), min_size=1, max_size=12),
    )
    def batch(self, max_records, budgets):
        tasks = sorted(t.task_name for t in self.runner.coordinator.initialize().job_model.tasks())
        limits = {t: b for t, b in zip(tasks, budgets * len(tasks), strict=False) if b is not None}
        self.runner.run_batch(max_records, budgets=limits)

    @rule(factor=FACTORS)
    def rescale(self, factor):
        self.runner.coordinator.rescale(factor)

    @rule()
    def forget_the_count(self):
        """The latest summary as a version before the count wrote it: from here the figure may be a bound."""
        if forget(self.store, "behind"):
            self.forgot = True

    @precondition(lambda self: len(self.inputs.topics[ORDERS]) < 3)
    @rule()
    def add_partition(self):
        self.inputs.add_partitions(ORDERS, 1)
        self.runner.coordinator.rescale()

    @invariant()
    def records_behind_are_the_records_left(self):
        report = lag_report(self.runner.coordinator.config, self.store, self.inputs)
        truth = left_to_process(self.runner)
        upper = sum(report.per_ssp.values())  # SEP-32's figure: each partition's end minus its slowest task
        assert upper >= report.total >= truth
        if not getattr(self, "forgot", False):
            assert report.exact, "the chain of counts is unbroken from the job's start"
        if report.exact:
            assert report.total == truth, (report.total, truth, report.done_ahead, report.apart)
        if not report.apart:
            assert report.total == upper and report.done_ahead == 0
        event("some records above the slowest task already processed" if report.done_ahead else "none")
        event("exact" if report.exact else "at most")


RecordsBehindMachine.TestCase.settings = settings(max_examples=examples(25), stateful_step_count=20, deadline=None)
TestRecordsBehind = RecordsBehindMachine.TestCase


def forget(store: CheckpointStore, job: str) -> bool:
    """Strip the count from the latest summary, as a version before it recorded it."""
    latest = store.metrics(job, limit=1)
    if not latest:
        return False
    old = {k: v for k, v in latest[-1].items() if k not in ("done_ahead", "lag_left_exact")}
    store.record_metrics(job, latest[-1]["batch_id"], latest[-1]["generation"], json.dumps(old))
    return True


def _runner(factor: int) -> tuple[ReferenceRunner, CheckpointStore]:
    inputs = MemoryInputs()
    inputs.create(ORDERS, 1)
    config = validate({"job.name": "behind", "task.inputs": str(ORDERS), "job.elasticity.factor": str(factor)})
    store = CheckpointStore("sqlite://")
    runner = ReferenceRunner(JobCoordinator(config, store, inputs), inputs)
    runner.coordinator.initialize()  # before the records: it starts at the end by default
    for i in range(40):
        inputs.produce(ORDERS, b"k%d" % (i % 13), b"v")
    return runner, store


def test_after_a_merge_the_watermarked_records_are_not_behind():
    """Tasks stopped early at factor 4 leave their siblings ahead; the merge to 2 starts at the slowest and
    watermarks the others: SEP-32's figure counts those records again, the records behind do not."""
    runner, store = _runner(4)
    tasks = sorted(t.task_name for t in runner.coordinator.current().job_model.tasks())
    runner.run_batch(40, budgets={tasks[0]: 1, tasks[2]: 2})  # two slow slices: buckets 0 and 2 stop early
    runner.coordinator.rescale(2)
    report = lag_report(runner.coordinator.config, store, runner.inputs)
    assert report.apart and report.exact
    assert report.total == left_to_process(runner) < sum(report.per_ssp.values())
    assert report.done_ahead == sum(report.per_ssp.values()) - report.total
    runner.drain()
    after = lag_report(runner.coordinator.config, store, runner.inputs)
    assert (after.total, after.exact, after.apart, after.done_ahead) == (0, True, (), 0)


def test_without_the_batches_count_the_figure_is_an_upper_bound_and_says_so():
    runner, store = _runner(4)
    tasks = sorted(t.task_name for t in runner.coordinator.current().job_model.tasks())
    runner.run_batch(40, budgets={tasks[1]: 0})
    runner.coordinator.rescale(2)
    assert forget(store, "behind")  # a summary from before the count
    report = lag_report(runner.coordinator.config, store, runner.inputs)
    assert not report.exact and report.done_ahead == 0
    assert report.total == sum(report.per_ssp.values()) >= left_to_process(runner)
    assert "lag at most" in report.describe()


def test_the_count_is_anchored_when_no_partition_is_apart():
    together = [cp("a", {0: 30}), cp("b", {1: 30})]
    assert not apart(together)
    assert carried(None, together) == DoneAhead(0, True, {P0: 30})
    assert carried(DoneAhead(7, False, {P0: 10}), together) == DoneAhead(0, True, {P0: 30})


def test_the_count_grows_by_what_a_batch_kept_and_shrinks_by_what_the_start_passed():
    before = DoneAhead(5, True, {P0: 10})
    drifted = [cp("a", {0: 14}), cp("b", {1: 30})]  # a stopped at 14, b went on to 30
    assert apart(drifted) == {P0}
    assert after_batch(before, 12, drifted) == DoneAhead(5 + 12 - 4, True, {P0: 14})
    assert after_batch(before, 12, drifted, lost=True) == DoneAhead(5 + 12 - 4, False, {P0: 14})  # a bound from here
    watermarked = [cp("a", {0: 14}, {0: (Watermark(4, 2, 30),)}), cp("b", {1: 14})]
    assert apart(watermarked) == {P0}
    assert carried(DoneAhead(3, True, {P0: 14}), watermarked) == DoneAhead(3, True, {P0: 14})


def test_a_start_set_back_or_a_partition_dropped_breaks_the_chain():
    drifted = [cp("a", {0: 14}), cp("b", {1: 30})]
    assert carried(DoneAhead(5, True, {P0: 20}), drifted) == DoneAhead(0, False, {P0: 14})
    other = SystemStreamPartition("kafka", "orders", 1)
    assert carried(DoneAhead(5, True, {P0: 10, other: 3}), drifted) == DoneAhead(0, False, {P0: 14})


def test_a_recorded_count_speaks_only_of_the_checkpoints_it_was_recorded_with():
    drifted = [cp("a", {0: 14}), cp("b", {1: 30})]
    summary = BatchSummary(
        job="j", batch_id=3, generation=2, factor=2, done_ahead=9, lag_left_exact=True,
        offsets_committed={"a": {"kafka.orders.0.0": 14}, "b": {"kafka.orders.0.1": 30}},
    )  # fmt: skip
    doc = json.loads(summary.to_json())
    assert recorded(doc, drifted, 2) == DoneAhead(9, True, {P0: 14})
    assert recorded(doc, [cp("a", {0: 16}), cp("b", {1: 30})], 2) is None  # a later batch committed without a count
    assert recorded(doc, drifted, 3) == DoneAhead(9, True, {P0: 14})  # a rescale since: carried() takes it on
    assert recorded({k: v for k, v in doc.items() if k != "done_ahead"}, drifted, 2) is None  # before the count


def test_the_job_page_and_its_json_show_the_records_behind_and_say_when_they_are_a_bound():
    from dataclasses import asdict

    from elasticity.views.jobview import build_view
    from elasticity.views.page import render

    runner, store = _runner(4)
    tasks = sorted(t.task_name for t in runner.coordinator.current().job_model.tasks())
    runner.run_batch(40, budgets={tasks[0]: 1, tasks[2]: 2})
    runner.coordinator.rescale(2)
    view = build_view(runner.coordinator.config, store, runner.inputs)
    data = asdict(view)
    assert data["records_behind"] == left_to_process(runner) < sum(data["records_behind_per_partition"].values())
    assert data["records_behind_exact"] and data["records_already_processed"] > 0 and data["records_behind_apart"]
    page = render(view)
    card = re.search(r"id=records-behind>(.*?)</div></div>", page, re.S)
    assert card and f"{view.records_behind:,}" in card.group(1) and "at most" not in card.group(1)
    assert "already processed" in card.group(1)

    assert forget(store, "behind")  # a summary from before the count
    bound = build_view(runner.coordinator.config, store, runner.inputs)
    assert not bound.records_behind_exact and bound.records_behind == sum(bound.records_behind_per_partition.values())
    assert "at most" in re.search(r"id=records-behind>(.*?)</div></div>", render(bound), re.S).group(1)
