"""The rescale state machine with state: per-key aggregates (count and sum) kept in real
stores (RocksDB, blob-store snapshots on a local folder), moved by the real rescale
code through random rescales 1..16, each one crashed at a random step and rerun.
Every key's committed aggregate always equals the reference over the records processed,
and sits in the virtual task that owns the key (per input partition: adding partitions
moves a key's later records to another partition, as Kafka's partitioner does)."""

import contextlib
import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from elasticity import faults
from elasticity.batch.coordinator.job_coordinator import JobCoordinator
from elasticity.checkpoint.store import CheckpointStore
from elasticity.config import validate
from elasticity.jobmodel.keybucket import key_bucket
from elasticity.jobmodel.model import SystemStream
from elasticity.jobmodel.tasknames import parse_task_name
from elasticity.state.backends.blob_manager import BlobStoreManager
from tests.support.examples import examples
from tests.support.memory import MemoryInputs, StatefulRunner
from tests.support.state_stores import SnapshotReader

ORDERS = SystemStream("kafka", "orders")
KEYS = st.one_of(st.none(), st.sampled_from([b"a", b"b", b"c", b"hot", b"k1", b"k2", b"k3", b"\x00", b"", b"\xff\xfe"]))
# every step of a rescale, in order; None: no crash
CRASH_POINTS = [
    None,
    "rescale.lease_acquired",
    "rescale.state.stale_cleaned",
    "rescale.state.journal_written",
    "rescale.state.source_read",
    "rescale.state.uploaded",
    "rescale.state.moved",
    "rescale.fenced",
    "rescale.generation_written",
    "rescale.checkpoints_written",
    "rescale.after_commit",
    "rescale.state.committed",
]


class StatefulRescaleMachine(RuleBasedStateMachine):
    @initialize(partitions=st.integers(1, 2), factor=st.integers(1, 16))
    def setup(self, partitions, factor):
        self.tmp = Path(tempfile.mkdtemp(prefix="state-machine-"))
        self.inputs = MemoryInputs()
        self.inputs.create(ORDERS, partitions)
        self.config = validate(
            {
                "job.name": "stateful-machine",
                "task.inputs": str(ORDERS),
                "job.elasticity.factor": str(factor),
                "systems.kafka.default.stream.samza.offset.default": "oldest",
                "app.class": "tests.support.apps:aggregates",
                "task.checkpoint.read.versions": "2,1",
                "stores.aggs.backup.factories": "blobstore",
                "blob.store.uri": str(self.tmp / "blobs"),
                "job.state.dir": str(self.tmp / "state"),
            }
        )
        self.store = CheckpointStore("sqlite://")
        self.runner = StatefulRunner(JobCoordinator(self.config, self.store, self.inputs), self.inputs)
        self.runner.coordinator.initialize()
        self.reader = SnapshotReader(*self.runner.coordinator.storage)

    def teardown(self):
        if hasattr(self, "store"):
            self.runner.drain()
            self.runner.assert_everything_processed_once()
            self._check(SnapshotReader(*self.runner.coordinator.storage))  # every task restored, none from memory
            self.store.close()
            shutil.rmtree(self.tmp, ignore_errors=True)

    @rule(keys=st.lists(KEYS, min_size=1, max_size=25))
    def produce(self, keys):
        for i, key in enumerate(keys):
            self.inputs.produce(ORDERS, key, b"v%d" % i)

    @rule(max_records=st.integers(1, 40), budgets=st.lists(st.none() | st.integers(0, 4), min_size=1, max_size=8))
    def batch(self, max_records, budgets):
        generation = self.runner.coordinator.initialize()
        tasks = sorted(t.task_name for t in generation.job_model.tasks())
        limits = {t: b for t, b in zip(tasks, budgets * len(tasks), strict=False) if b is not None}
        self.runner.run_batch(max_records, budgets=limits)

    @rule(factor=st.integers(1, 16), crash=st.sampled_from(CRASH_POINTS))
    def rescale(self, factor, crash):
        """Crashed at one step, the old or (after the commit) the new generation is usable; the rerun completes."""
        c = self.runner.coordinator
        before = c.current().number
        if crash is not None:
            with faults.raise_at(crash) as seen, contextlib.suppress(faults.InjectedFault):
                c.rescale(factor)
            if crash in seen:
                self.committed_state_is_the_reference()
                assert c.current().number == before + (crash in ("rescale.after_commit", "rescale.state.committed"))
        c.rescale(factor)
        assert c.current().factor == factor
        assert BlobStoreManager(str(self.tmp / "blobs")).list("stateful-machine-1/rescale/") == []  # journals handled

    @precondition(lambda self: sum(len(p) for p in self.inputs.topics.values()) < 3)
    @rule()
    def add_partition(self):
        self.inputs.add_partitions(ORDERS, 1)

    @invariant()
    def committed_state_is_the_reference(self):
        self._check(self.reader)

    def _check(self, reader: SnapshotReader) -> None:
        c = self.runner.coordinator
        generation = c.current()
        if generation is None:
            return
        stored = reader.read(generation.job_model, c.checkpoints(generation))
        flat = {}
        for task, stores in stored.items():
            parsed = parse_task_name(task)
            for key, agg in stores["aggs"].items():
                assert generation.factor == 1 or key_bucket(key, 0, generation.factor) == parsed.key_bucket, (key, task)
                flat[(parsed.partition, key)] = agg
        assert flat == self.runner.expected_state()


StatefulRescaleMachine.TestCase.settings = settings(max_examples=examples(12), stateful_step_count=14, deadline=None)
TestStatefulRescale = StatefulRescaleMachine.TestCase
