"""The store API, its bucket check, the state config and local transactional state (rocksdict, no backend)."""

import json

import pytest

from elasticity.api import StoreDescriptor
from elasticity.checkpoint.serde import v2_from_json, v2_to_json
from elasticity.checkpoint.task_checkpoint import CheckpointId, CheckpointV2, TaskCheckpoint, to_v2
from elasticity.config import BLOB_STORE_FACTORY, KAFKA_CHANGELOG_FACTORY, ConfigError, ConfigWarning, validate
from elasticity.jobmodel.keybucket import key_hash
from elasticity.jobmodel.model import TaskModel, TaskName
from elasticity.state import ContainerStorageManager, StorageConfig, WrongBucketError
from elasticity.state.handover import parking
from elasticity.state.rocksdb import KEEP_LOG_FILE_NUM, MAX_LOG_FILE_SIZE, MAX_MANIFEST_FILE_SIZE
from tests.support.state_job import reference, run

BASE = {"job.name": "j", "task.inputs": "kafka.in", "task.checkpoint.read.versions": "2,1"}
COUNTS = StoreDescriptor("counts", "string", "json")


def keys_in(bucket: int, factor: int, n: int, prefix: str = "user-") -> list[str]:
    return [k for k in (f"{prefix}{i}" for i in range(50 * n)) if key_hash(k.encode()) % factor == bucket][:n]


def container(tmp_path, tasks=("Partition 0",), descriptors=(COUNTS,), **props):
    config = validate({**BASE, "job.state.dir": str(tmp_path / "state"), "blob.store.uri": str(tmp_path / "blobs"), **props})
    models = [TaskModel(TaskName(t), frozenset(), i) for i, t in enumerate(tasks)]
    return ContainerStorageManager(StorageConfig.of(config, list(descriptors)), list(descriptors), models, len(models))


def commit(csm) -> dict[TaskName, CheckpointV2]:
    cp_id = CheckpointId.create()
    markers = csm.upload(csm.snapshot(cp_id))
    cps = {t: CheckpointV2(cp_id, {}, m) for t, m in markers.items()}
    csm.cleanup(cps)
    return cps


@pytest.fixture
def kv(tmp_path):
    csm = container(tmp_path)
    csm.restore({})
    yield csm.store(TaskName("Partition 0"), "counts")
    csm.close()


def test_get_put_delete_and_none_deletes(kv):
    assert kv.get("a") is None
    kv.put("a", {"n": 1})
    assert kv.get("a") == {"n": 1}
    kv.put("a", None)
    assert kv.get("a") is None
    kv.put_all({"b": 2, "c": 3})
    kv.put_all([("d", 4), ("b", None)])
    assert kv.get_all(["a", "b", "c", "d"]) == {"c": 3, "d": 4}
    kv.delete("c")
    kv.delete_all(["d", "zz"])
    assert list(kv.all()) == []
    m = kv.metrics
    assert m.puts == 7 and m.deletes == 2 and m.gets == 7 and m.put_ns > 0 and m.get_ns > 0  # batch entries count as puts


def test_scans_are_in_key_order(kv):
    kv.put_all({f"user-{i:02d}": i for i in range(20)} | {"other": -1, "user": 0})
    assert [k for k, _ in kv.range("user-05", "user-08")] == ["user-05", "user-06", "user-07"]
    assert [v for _, v in kv.prefix("user-1")] == list(range(10, 20))
    assert [k for k, _ in kv.all()][:3] == ["other", "user", "user-00"]


def test_prefix_scans_need_a_string_or_byte_key(tmp_path):
    csm = container(tmp_path, descriptors=(StoreDescriptor("j", "json", "json"),))
    csm.restore({})
    with pytest.raises(TypeError, match="prefix scans"):
        list(csm.store(TaskName("Partition 0"), "j").prefix("a"))
    csm.close()


def test_a_key_of_another_bucket_fails_naming_store_key_and_task(tmp_path):
    csm = container(tmp_path, tasks=("Partition_3-1-4",))
    csm.restore({})
    kv = csm.store(TaskName("Partition_3-1-4"), "counts")
    for k in keys_in(1, 4, 5):
        kv.put(k, 1)
    wrong = keys_in(2, 4, 1)[0]
    with pytest.raises(
        WrongBucketError, match=rf"store 'counts': key '{wrong}' belongs to bucket 2 of factor 4, not to task 'Partition_3-1-4'"
    ):
        kv.put(wrong, 1)
    with pytest.raises(WrongBucketError):
        kv.put_all({keys_in(1, 4, 1)[0]: 1, wrong: 1})
    with pytest.raises(WrongBucketError):
        kv.delete(wrong)
    assert kv.metrics.store_identify_ns > 0
    csm.close()


def test_a_declared_input_key_function_decides_the_bucket(tmp_path):
    # store key "user-7:total" belongs to input key "user-7"
    d = StoreDescriptor("totals", "string", "json", input_key=lambda k: k.split(":")[0].encode())
    csm = container(tmp_path, tasks=("Partition_0-0-2",), descriptors=(d,))
    csm.restore({})
    kv = csm.store(TaskName("Partition_0-0-2"), "totals")
    kv.put(f"{keys_in(0, 2, 1)[0]}:total", 1)
    with pytest.raises(WrongBucketError):
        kv.put(f"{keys_in(1, 2, 1)[0]}:total", 1)
    csm.close()


def test_store_names_and_serdes_are_checked():
    with pytest.raises(ValueError, match="store name"):
        StoreDescriptor("a.b")
    with pytest.raises(ValueError, match="value serde 'avro'"):
        StoreDescriptor("a", value_serde="avro")


def test_config_precedence_and_short_names(monkeypatch):
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)  # the config's servers, not an earlier test's override
    d = [StoreDescriptor("a"), StoreDescriptor("b")]
    config = validate(
        {
            **BASE,
            "stores.backup.factories": "blobstore",
            "stores.a.backup.factories": "kafka,BlobStoreStateBackendFactory",
            "stores.a.changelog": "kafka.a-changelog",
            "stores.a.restore.factories": "blobstore,kafka",
            "stores.b.blob.retain": "5",
            "systems.kafka.consumer.bootstrap.servers": "127.0.0.1:1",
        }
    )
    storage = StorageConfig.of(config, d)
    a, b = storage.store("a"), storage.store("b")
    assert a.backup_factories == (KAFKA_CHANGELOG_FACTORY, BLOB_STORE_FACTORY)
    assert a.restore_factories == (BLOB_STORE_FACTORY, KAFKA_CHANGELOG_FACTORY)
    assert a.changelog_kafka is not None and str(a.changelog_kafka) == a.changelog_kafka.admin.bootstrap == "127.0.0.1:1"
    assert b.backup_factories == b.restore_factories == (BLOB_STORE_FACTORY,) and b.blob_retain == 5
    assert storage.transactional and storage.restore_pool_size == 2 and storage.commit_pool_size == 2
    # Samza's pool sizes: min(max(2 x tasks (x restore backends), the size), the max size)
    assert (storage.commit_threads(1), storage.commit_threads(5), storage.commit_threads(100)) == (2, 10, 64)
    assert (storage.restore_threads(1), storage.restore_threads(3), storage.restore_threads(40)) == (4, 12, 64)
    assert storage.state_dir is None and str(storage.local_state_dir()).endswith("j/state")  # resolved where the stores open
    assert storage.blob_uri.endswith("j/blobs")


def test_a_changelog_alone_means_the_kafka_backend():
    config = validate({**BASE, "stores.a.changelog": "kafka.a-log", "systems.kafka.consumer.bootstrap.servers": "h:1"})
    assert StorageConfig.of(config, [StoreDescriptor("a")]).store("a").backup_factories == (KAFKA_CHANGELOG_FACTORY,)
    assert StorageConfig.of(validate(BASE), [StoreDescriptor("a")]).store("a").backup_factories == ()


def test_bad_state_config_fails_naming_the_key():
    with pytest.raises(ConfigError, match="stores.a.backup.factories='rocks'"):
        validate({**BASE, "stores.a.backup.factories": "rocks"})
    with pytest.raises(ConfigError, match="each once"):
        validate({**BASE, "stores.a.backup.factories": "kafka,KafkaChangelogStateBackendFactory"})
    with pytest.raises(ConfigError, match="job.container.commit.thread.pool.size"):
        validate({**BASE, "job.container.commit.thread.pool.size": "0"})
    with pytest.raises(ConfigError, match="stores.a.changelog is required"):
        StorageConfig.of(validate({**BASE, "stores.a.backup.factories": "kafka"}), [StoreDescriptor("a")])
    with pytest.raises(ConfigError, match="stores.typo.blob.retain: the app declares no store 'typo'"):
        StorageConfig.of(validate({**BASE, "stores.typo.blob.retain": "3"}), [StoreDescriptor("a")])


def test_singular_restore_factory_is_accepted_with_a_warning():
    with pytest.warns(ConfigWarning, match="restore.factory is deprecated"):
        config = validate({**BASE, "stores.a.restore.factory": "blobstore"})
    assert StorageConfig.of(config, [StoreDescriptor("a")]).store("a").restore_factories == (BLOB_STORE_FACTORY,)


def test_markers_round_trip_through_checkpoint_v2():
    markers = {KAFKA_CHANGELOG_FACTORY: {"counts": '{"version":1}'}, BLOB_STORE_FACTORY: {"counts": "j-1/p/counts/index/x.json"}}
    cp = TaskCheckpoint(task_name=TaskName("Partition 0"), offsets={}, checkpoint_id=CheckpointId(5, 6), state_markers=markers)
    back = v2_from_json(v2_to_json(to_v2(cp)))
    assert back.checkpoint_id == CheckpointId(5, 6) and back.state_checkpoint_markers == markers
    assert json.loads(v2_to_json(to_v2(cp)))["state-checkpoint-markers"] == markers
    assert cp == TaskCheckpoint(task_name=TaskName("Partition 0"), offsets={})  # identity stays the offsets


def test_uncommitted_writes_are_trimmed_by_restore(tmp_path):
    csm = container(tmp_path)
    task = TaskName("Partition 0")
    csm.restore({})
    csm.store(task, "counts").put_all({"a": 1, "b": 2})
    cps = commit(csm)
    kv = csm.store(task, "counts")
    kv.put("a", 100)
    kv.delete("b")
    csm.snapshot(CheckpointId.create())  # snapshotted, never committed
    csm.store(task, "counts").put("c", 3)
    assert csm.restore(cps) == {task: {"counts": "local"}}
    assert dict(csm.store(task, "counts").all()) == {"a": 1, "b": 2}
    assert csm.restore(cps) == {task: {"counts": "open"}}  # untouched since: nothing to do
    csm.close()
    again = container(tmp_path)  # another process on the same host
    assert again.restore(cps) == {task: {"counts": "local"}}
    assert dict(again.store(task, "counts").all()) == {"a": 1, "b": 2}
    again.close()


def test_a_store_opened_every_batch_keeps_a_bounded_number_of_info_logs(tmp_path):
    """RocksDB starts an info LOG per open and keeps the old ones unless told: a store opened once per batch
    would gather one file per batch in its live folder, without end."""
    csm = container(tmp_path)
    task = TaskName("Partition 0")
    cps = None
    for i in range(6):
        csm.restore(cps or {})
        csm.store(task, "counts").put("a", i)
        cps = commit(csm)
        csm.release()
    live = csm.tasks[task]["counts"].dirs.live
    assert len([f for f in live.iterdir() if f.name.startswith("LOG")]) <= KEEP_LOG_FILE_NUM
    csm.close()


def fresh_store(tmp_path, entries: dict) -> tuple[ContainerStorageManager, TaskName]:
    """One task's store, restored empty, with `entries` written."""
    csm, task = container(tmp_path), TaskName("Partition 0")
    csm.restore({})
    csm.store(task, "counts").put_all(entries)
    return csm, task


def test_a_parked_store_is_used_as_it_is_by_its_process_and_handed_to_another_holder_on_request(tmp_path):
    csm, task = fresh_store(tmp_path, {"a": 1})
    cps = commit(csm)
    ts = csm.tasks[task]["counts"]
    kv = ts.kv
    parking().park(ts)
    parking().take(ts)
    assert csm.restore(cps) == {task: {"counts": "open"}} and ts.kv is kv  # no close, no open
    parking().park(ts)
    other = container(tmp_path)  # another ContainerState of this process, for the same task: it asks the keeper
    assert other.restore(cps) == {task: {"counts": "local"}} and ts.kv is None  # released sealed, opened as it is
    assert dict(other.store(task, "counts").all()) == {"a": 1}
    other.close()
    csm.close()


def test_cleanup_keeps_only_the_committed_local_checkpoint(tmp_path):
    csm, task = fresh_store(tmp_path, {"a": 1})
    csm.snapshot(CheckpointId.create())  # a commit that failed after its snapshot
    cps = commit(csm)
    dirs = csm.tasks[task]["counts"].dirs
    assert [p.name for p in dirs.checkpoints()] == [f"checkpoint-{cps[task].checkpoint_id}"]
    csm.close()


def test_no_checkpoint_means_an_empty_store(tmp_path):
    csm = container(tmp_path)
    task = TaskName("Partition 0")
    csm.restore({})
    csm.store(task, "counts").put("a", 1)
    csm.snapshot(CheckpointId.create())
    assert csm.restore({}) == {task: {"counts": "empty"}}
    assert list(csm.store(task, "counts").all()) == []
    csm.close()


def test_non_transactional_state_reuses_the_local_store_as_it_is(tmp_path):
    props = {"task.transactional.state.checkpoint.enabled": "false"}
    csm = container(tmp_path, **props)
    task = TaskName("Partition 0")
    csm.restore({})
    csm.store(task, "counts").put("a", 1)
    cps = commit(csm)
    csm.store(task, "counts").put("b", 2)  # never committed
    csm.close()
    again = container(tmp_path, **props)
    again.restore(cps)
    assert dict(again.store(task, "counts").all()) == {"a": 1, "b": 2}
    again.close()


def test_local_only_job_survives_restarts(tmp_path):
    props = {"job.state.dir": str(tmp_path / "state")}
    run(tmp_path / "w", 2, props)
    assert run(tmp_path / "w", 4, props) == reference(4)


def test_a_store_that_stays_open_keeps_its_info_log_and_manifest_bounded(tmp_path):
    """A store that stays open in its worker logs every flush and checkpoint to one LOG, and records each in its
    MANIFEST: both roll at a size, so what the live folder holds does not grow with the job's age."""
    csm = container(tmp_path)
    task = TaskName("Partition 0")
    csm.restore({})
    store = csm.store(task, "counts")
    live = csm.tasks[task]["counts"].dirs.live
    for i in range(400):  # about 7.5 KB of LOG a commit: 3 MB without the limit
        store.put(f"k{i % 50}", i)
        commit(csm)
    logs = sum(f.stat().st_size for f in live.iterdir() if f.name.startswith("LOG"))
    manifests = sum(f.stat().st_size for f in live.iterdir() if f.name.startswith("MANIFEST"))
    assert logs <= (KEEP_LOG_FILE_NUM + 1) * MAX_LOG_FILE_SIZE and manifests <= 2 * MAX_MANIFEST_FILE_SIZE
    csm.close()
