"""Random keyed streams, random batches, random rescales to any factor 1..16, random
new partitions: the reference runner, with the real planner rules, migration,
coordinator and SQL store, never loses a record, never processes one twice and
keeps per-key order."""

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from elasticity.batch.coordinator.job_coordinator import JobCoordinator
from elasticity.checkpoint.store import CheckpointStore
from elasticity.config import validate
from elasticity.jobmodel.model import SystemStream
from tests.support.examples import examples
from tests.support.memory import MemoryInputs, ReferenceRunner

STREAMS = (SystemStream("kafka", "orders"), SystemStream("kafka", "payments"))
KEYS = st.one_of(st.none(), st.sampled_from([b"a", b"b", b"c", b"hot", b"k1", b"k2", b"k3", b"\x00", b""]))


class RescaleMachine(RuleBasedStateMachine):
    @initialize(
        partitions=st.tuples(st.integers(1, 3), st.integers(1, 3)),
        factor=st.integers(1, 16),
        grouper=st.sampled_from(["GroupByPartition", "GroupBySystemStreamPartition"]),
        read_versions=st.sampled_from(["1", "2", "2,1", "1,2"]),
        offset_default=st.sampled_from(["oldest", "upcoming"]),
    )
    def setup(self, partitions, factor, grouper, read_versions, offset_default):
        self.inputs = MemoryInputs()
        for s, n in zip(STREAMS, partitions, strict=True):
            self.inputs.create(s, n)
        config = validate(
            {
                "job.name": "machine",
                "task.inputs": ",".join(map(str, STREAMS)),
                "job.elasticity.factor": str(factor),
                "job.systemstreampartition.grouper.factory": grouper,
                "systems.kafka.default.stream.samza.offset.default": offset_default,
                "task.checkpoint.read.versions": read_versions,
                "task.checkpoint.history.size": "3",
            }
        )
        self.store = CheckpointStore("sqlite://")
        self.runner = ReferenceRunner(JobCoordinator(config, self.store, self.inputs), self.inputs)
        # the job starts before anything is produced, so under `upcoming` too every record must be processed,
        # including those of partitions added later (they start at their oldest offset)
        self.runner.coordinator.initialize()
        self.factors_used = {factor}

    def teardown(self):
        if hasattr(self, "store"):
            self.runner.drain()
            self.runner.assert_everything_processed_once()
            for cp in self.runner.coordinator.checkpoints(self.runner.coordinator.current()).values():
                assert not cp.watermarks, f"{cp.task_name.name} kept watermarks after catching up"
            self.store.close()

    @rule(stream=st.sampled_from(STREAMS), keys=st.lists(KEYS, min_size=1, max_size=30))
    def produce(self, stream, keys):
        for i, key in enumerate(keys):
            self.inputs.produce(stream, key, b"v%d" % i)

    @rule(max_records=st.integers(1, 40), budgets=st.lists(st.none() | st.integers(0, 4), min_size=1, max_size=8))
    def batch(self, max_records, budgets):
        """Some virtual tasks are slow: they stop after a few records and commit only what they did."""
        generation = self.runner.coordinator.initialize()
        tasks = sorted(t.task_name for t in generation.job_model.tasks())
        limits = {t: b for t, b in zip(tasks, budgets * len(tasks), strict=False) if b is not None}
        self.runner.run_batch(max_records, budgets=limits)

    @rule(factor=st.integers(1, 16))
    def rescale(self, factor):
        self.runner.coordinator.rescale(factor)
        self.factors_used.add(factor)
        assert self.runner.coordinator.current().factor == factor

    @precondition(lambda self: sum(len(p) for p in self.inputs.topics.values()) < 8)
    @rule(stream=st.sampled_from(STREAMS), discover_now=st.booleans())
    def add_partition(self, stream, discover_now):
        self.inputs.add_partitions(stream, 1)
        if discover_now:
            self.runner.coordinator.rescale()  # picks up the new partition at the current factor
        # else the next batch discovers it, after records may have been written to it

    @invariant()
    def no_duplicates_and_key_order(self):
        self.runner.assert_no_duplicates()
        self.runner.assert_key_order()

    @invariant()
    def checkpoints_cover_only_processed_records_and_watermarks_stay_bounded(self):
        """Both from one read of the current generation's checkpoints: a read decodes every task's checkpoint, up to
        16 x 8 of them after each step, one of an example's larger costs."""
        generation = self.runner.coordinator.current()
        if generation is None:
            return
        cps = self.runner.coordinator.checkpoints(generation)
        self.runner.assert_checkpoints_cover_only_processed(generation, cps)
        bound = sum(self.factors_used)
        for cp in cps.values():
            for ssp, wms in cp.watermarks.items():
                assert len(wms) <= bound, (cp.task_name, ssp, len(wms), bound)
                assert all(w.offset > cp.offsets[ssp] for w in wms)


RescaleMachine.TestCase.settings = settings(max_examples=examples(60), stateful_step_count=30, deadline=None)
TestRescale = RescaleMachine.TestCase
