"""State moves with its keys on a rescale F -> G (state/rescale.py): real stores,
a blob store on a local folder, any factors 1..16."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elasticity import faults
from elasticity.api import StoreDescriptor
from elasticity.checkpoint.task_checkpoint import CheckpointId, TaskCheckpoint
from elasticity.config import KAFKA_CHANGELOG_FACTORY
from elasticity.jobmodel.keybucket import key_bucket, key_hash
from elasticity.jobmodel.model import NO_KEY_BUCKET, TaskName
from elasticity.jobmodel.tasknames import parse_task_name
from elasticity.state.backends.blob_manager import BlobStoreManager
from elasticity.state.rescale import StatefulRescaleError, move_state, plan_sources
from elasticity.state.state_move import clean_stale_moves
from tests.support.examples import examples
from tests.support.state_stores import COUNTS, commit, job_config, model, read, storage

KEYS = st.lists(st.text(min_size=0, max_size=6), min_size=1, max_size=60, unique=True)


def owner(m, factor: int, partition: int, key: str) -> TaskName:
    """The task the router sends a record of `key` on `partition` to (key_bucket: the router's function)."""
    bucket = key_bucket(key.encode(), 0, factor) if factor > 1 else NO_KEY_BUCKET
    for t in m.tasks():
        p = parse_task_name(t.task_name)
        if p.partition == partition and p.key_bucket == bucket:
            return t.task_name
    raise AssertionError((partition, key))


def place(m, factor, values: dict[str, int], partitions: int) -> dict[TaskName, dict[str, dict]]:
    """Each key in its task, as if its records came from partition len(key) % partitions."""
    out = {t.task_name: {"counts": {}} for t in m.tasks()}
    for k, v in values.items():
        out[owner(m, factor, len(k) % partitions, k)]["counts"][k] = v
    return out


def _all_empty(m):
    return {t.task_name: TaskCheckpoint(task_name=t.task_name, offsets={}) for t in m.tasks()}


def moved(tmp_path, old_factor, new_factor, values, partitions=2, descriptors=(COUNTS,), dry_run=False):
    config = job_config(tmp_path, old_factor)
    s = storage(config, descriptors)
    old_model, new_model = model(config, partitions), model(job_config(tmp_path, new_factor), partitions)
    cps = commit(s, old_model, place(old_model, old_factor, values, partitions))
    move = move_state(
        s,
        list(descriptors),
        old_model,
        old_factor=old_factor,
        from_generation=1,
        old_cps=cps,
        new_model=new_model,
        new_factor=new_factor,
        dry_run=dry_run,
    )
    return s, new_model, move


def test_sources_are_the_old_buckets_congruent_mod_gcd_of_the_same_partition(tmp_path):
    old, new = model(job_config(tmp_path, 4), 2), model(job_config(tmp_path, 6), 2)
    sources = plan_sources(old, 4, new, 6)
    assert sources[TaskName("Partition_1-3-6")] == (TaskName("Partition_1-1-4"), TaskName("Partition_1-3-4"))  # 3 = 1 = 3 (mod 2)
    assert sources[TaskName("Partition_0-0-6")] == (TaskName("Partition_0-0-4"), TaskName("Partition_0-2-4"))
    single = model(job_config(tmp_path, 1), 2)
    assert plan_sources(single, 1, new, 6)[TaskName("Partition_0-5-6")] == (TaskName("Partition 0"),)
    assert plan_sources(new, 6, single, 1)[TaskName("Partition 1")] == tuple(TaskName(f"Partition_1-{b}-6") for b in range(6))


@settings(max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(old_factor=st.integers(1, 16), new_factor=st.integers(1, 16), keys=KEYS, partitions=st.integers(1, 2))
def test_every_entry_lands_in_the_task_of_its_key_at_the_new_factor(tmp_path_factory, old_factor, new_factor, keys, partitions):
    tmp_path = tmp_path_factory.mktemp("move")
    values = {k: {"n": i, "sum": -i * 1.5} for i, k in enumerate(keys)}
    s, new_model, move = moved(tmp_path, old_factor, new_factor, values, partitions)
    got = read(s, new_model, move.apply(_all_empty(new_model)))
    assert got == place(new_model, new_factor, values, partitions)
    if old_factor == new_factor:  # same tasks: the snapshots stay as they are
        assert {t.how for t in move.transfers} == {"kept"} and move.journal is None
        return
    done = [t for t in move.transfers if t.how == "moved"]
    assert sum(t.keys for t in done) == len(values) and all(t.sources for t in done)
    assert BlobStoreManager(s.blob_uri).list("move-1/rescale/") == [move.journal]  # until the generation is written


def test_negative_hashes_use_pmod_and_none_keys_are_not_stored(tmp_path):
    keys = [f"user-{i}" for i in range(200)]
    assert any(key_hash(k.encode()) < 0 for k in keys) and any(key_hash(k.encode()) > 0 for k in keys)
    values = {k: i for i, k in enumerate(keys)}
    s, new_model, move = moved(tmp_path, 3, 7, values, partitions=1)
    got = read(s, new_model, move.apply(_all_empty(new_model)))
    for task, stores in got.items():
        bucket = parse_task_name(task).key_bucket
        assert all(key_hash(k.encode()) % 7 == bucket for k in stores["counts"])  # Python's % is pmod: never negative
    assert sum(len(v["counts"]) for v in got.values()) == 200
    with pytest.raises(ValueError, match="must not be None"):
        COUNTS.key_bytes(None)


def test_composite_store_keys_follow_their_input_key(tmp_path):
    """A window store keyed `user|window` moves by the user's bucket (StoreDescriptor.input_key)."""
    windows = StoreDescriptor("windows", "string", "json", input_key=lambda k: k.split("|")[0].encode())
    config = job_config(tmp_path, 2, (windows,))
    s = storage(config, (windows,))
    old_model, new_model = model(config, 1), model(job_config(tmp_path, 5, (windows,)), 1)
    entries = {t.task_name: {"windows": {}} for t in old_model.tasks()}
    for i in range(40):
        user = f"u{i}"
        entries[owner(old_model, 2, 0, user)]["windows"].update({f"{user}|{w}": w for w in range(3)})
    cps = commit(s, old_model, entries, (windows,))
    move = move_state(s, [windows], old_model, old_factor=2, from_generation=1, old_cps=cps, new_model=new_model, new_factor=5)
    got = read(s, new_model, move.apply(_all_empty(new_model)), (windows,))
    for task, stores in got.items():
        assert stores["windows"] and all(owner(new_model, 5, 0, k.split("|")[0]) == task for k in stores["windows"])
    assert sum(len(v["windows"]) for v in got.values()) == 120


def test_dry_run_counts_and_writes_nothing(tmp_path):
    values = {f"k{i}": i for i in range(50)}
    s, _, move = moved(tmp_path, 2, 3, values, dry_run=True)
    before = BlobStoreManager(s.blob_uri).list("")
    assert move.dry_run and not move.markers and move.journal is None
    assert sum(t.keys for t in move.transfers) == 50 and sum(t.bytes for t in move.transfers) > 0
    text = move.describe()
    assert "would move 50 keys" in text and "Partition_0-2-3 <- Partition_0-0-2 + Partition_0-1-2: counts" in text
    assert BlobStoreManager(s.blob_uri).list("") == before


def test_same_factor_with_an_added_partition_keeps_the_snapshots(tmp_path):
    config = job_config(tmp_path, 2)
    s = storage(config)
    old_model, new_model = model(config, 1), model(config, 2)
    cps = commit(s, old_model, place(old_model, 2, {f"k{i}": i for i in range(20)}, 1))
    move = move_state(s, [COUNTS], old_model, old_factor=2, from_generation=1, old_cps=cps, new_model=new_model, new_factor=2)
    assert {t.task.name: t.how for t in move.transfers} == {
        "Partition_0-0-2": "kept",
        "Partition_0-1-2": "kept",
        "Partition_1-0-2": "empty",
        "Partition_1-1-2": "empty",
    }
    assert move.markers == {t: cp.state_markers for t, cp in cps.items()} and move.journal is None
    assert move.checkpoint_ids == {t: cp.checkpoint_id for t, cp in cps.items()}


def test_a_changelog_only_store_is_refused_naming_the_store_and_the_fix(tmp_path):
    props = {
        "stores.counts.backup.factories": "kafka",
        "stores.counts.changelog": "kafka.counts-log",
        "systems.kafka.consumer.bootstrap.servers": "127.0.0.1:1",
    }
    config = job_config(tmp_path, 2, **props)
    s = storage(config)
    old_model, new_model = model(config, 1), model(job_config(tmp_path, 4, **props), 1)
    cps = {
        t.task_name: TaskCheckpoint(
            task_name=t.task_name,
            offsets={},
            checkpoint_id=CheckpointId.create(),
            state_markers={KAFKA_CHANGELOG_FACTORY: {"counts": "{}"}},
        )
        for t in old_model.tasks()
    }
    with pytest.raises(
        StatefulRescaleError, match=r"store 'counts' .*changelog only.*stores.counts.backup.factories=kafka,blobstore"
    ):
        move_state(s, [COUNTS], old_model, old_factor=2, from_generation=1, old_cps=cps, new_model=new_model, new_factor=4)


@pytest.mark.parametrize(
    "point", ["rescale.state.journal_written", "rescale.state.source_read", "rescale.state.uploaded", "rescale.state.moved"]
)
def test_a_crashed_move_leaves_the_old_snapshots_and_a_rerun_removes_its_leftovers(tmp_path, point):
    config = job_config(tmp_path, 2)
    s = storage(config)
    old_model, new_model = model(config, 2), model(job_config(tmp_path, 3), 2)
    values = {f"k{i}": i for i in range(100)}
    cps = commit(s, old_model, place(old_model, 2, values, 2))
    blobs = BlobStoreManager(s.blob_uri)
    before = blobs.list("")
    with pytest.raises(faults.InjectedFault), faults.raise_at(point):
        move_state(s, [COUNTS], old_model, old_factor=2, from_generation=7, old_cps=cps, new_model=new_model, new_factor=3)
    assert set(before) < set(blobs.list(""))  # the journal at least; old snapshots untouched
    assert read(s, old_model, cps) == place(old_model, 2, values, 2)
    assert len(clean_stale_moves(s, 7)) == 1  # started from generation 7, which is still current: it never committed
    assert blobs.list("") == before
    move = move_state(
        s, [COUNTS], old_model, old_factor=2, from_generation=7, old_cps=cps, new_model=new_model, new_factor=3
    )  # the rerun completes
    assert read(s, new_model, move.apply(_all_empty(new_model))) == place(new_model, 3, values, 2)


def test_the_journal_of_a_committed_move_goes_and_its_snapshots_stay(tmp_path):
    values = {f"k{i}": i for i in range(30)}
    s, new_model, move = moved(tmp_path, 2, 4, values)
    assert len(clean_stale_moves(s, 2)) == 1  # the generation moved on from 1: the move's snapshots are in use
    assert BlobStoreManager(s.blob_uri).list("move-1/rescale/") == []
    assert read(s, new_model, move.apply(_all_empty(new_model))) == place(new_model, 4, values, 2)
