"""State backends against real components: the Kafka changelog on the embedded
broker, the blob store on a SeaweedFS S3 server; dual commit, restore from each
backend alone, missing-marker fallback, changelog trimming and bootstrap."""

import json
import logging
import shutil
import uuid

from elasticity.checkpoint.task_checkpoint import CheckpointId, CheckpointV2
from elasticity.config import BLOB_STORE_FACTORY as BLOB
from elasticity.config import KAFKA_CHANGELOG_FACTORY as KAFKA
from elasticity.jobmodel.keybucket import key_hash
from elasticity.jobmodel.model import TaskName
from elasticity.state.backends.changelog import ChangelogClient, KafkaChangelogMarker
from tests.support.state_job import TASKS, committed, manager, reference, run, state


def props(tmp_path, bootstrap=None, s3=None, backups="kafka", restores=None, state_dir="state"):
    p = {
        "job.state.dir": str(tmp_path / state_dir),
        "stores.counts.backup.factories": backups,
        "blob.store.uri": s3.uri(f"t-{uuid.uuid4().hex[:8]}") if s3 else str(tmp_path / "blobs"),
    }
    if bootstrap:
        p |= {
            "stores.counts.changelog": f"kafka.counts-{uuid.uuid4().hex[:8]}",
            "systems.kafka.consumer.bootstrap.servers": bootstrap,
        }
    if restores:
        p["stores.counts.restore.factories"] = restores
    return p


def restored(workdir, p, **override):
    """(sources, state) of a fresh container restoring the last committed checkpoint."""
    csm = manager({**p, **override})
    try:
        sources = csm.restore(committed(workdir)[1] or {})
        return {s for by_store in sources.values() for s in by_store.values()}, state(csm)
    finally:
        csm.close()


def changelog_last_values(p, bootstrap) -> dict[str, int]:
    topic = p["stores.counts.changelog"].split(".", 1)[1]
    from kafka import TopicPartition

    from elasticity.config import validate
    from elasticity.kafka.admin import system_clients

    client = ChangelogClient(system_clients(validate({"job.name": "j", "task.inputs": "kafka.in", **p})))
    last = {}
    for i in range(len(TASKS)):
        for _, k, v in client.read(TopicPartition(topic, i), 0, None):
            last[k.decode()] = None if v is None else json.loads(v)
    return {k: v for k, v in last.items() if v is not None}


def test_changelog_marker_restore_and_bootstrap(tmp_path, kafka_bootstrap, caplog):
    p = props(tmp_path, kafka_bootstrap)
    assert run(tmp_path / "w", 3, p) == reference(3)
    n, cps = committed(tmp_path / "w")
    marker = cps[TASKS[1]].state_checkpoint_markers[KAFKA]["counts"]
    d = json.loads(marker)
    assert list(d) == ["version", "changelog-ssp", "changelog-offset"] and d["version"] == 1  # Samza's order
    assert list(d["changelog-ssp"].items()) == [  # SamzaObjectMapper's HashMap order
        ("system", "kafka"),
        ("partition", 1),
        ("stream", p["stores.counts.changelog"].split(".", 1)[1]),
        ("keyBucket", 1),
    ]
    assert isinstance(d["changelog-offset"], str) and KafkaChangelogMarker.from_json(marker).to_json() == marker
    assert restored(tmp_path / "w", p, **{"job.state.dir": str(tmp_path / "fresh")}) == ({KAFKA}, reference(3))
    # a checkpoint without markers (a store added to a running job): the changelog from its start, and a
    # WARNING saying how many records it held
    bare = {t: CheckpointV2(cp.checkpoint_id, {}, {}) for t, cp in cps.items()}
    csm = manager({**p, "job.state.dir": str(tmp_path / "bare")})
    assert {s for v in csm.restore(bare).values() for s in v.values()} == {"bootstrap"}
    assert state(csm) == reference(3)
    csm.close()
    bootstraps = [r for r in caplog.records if "bootstrapping from the changelog's start restored" in r.getMessage()]
    assert bootstraps and all(r.levelno == logging.WARNING for r in bootstraps)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_first_start_with_a_changelog_logs_info_not_error(tmp_path, kafka_bootstrap, caplog):
    """A new stateful job's first batch: its checkpoints have ids and no markers, its changelog is empty: a
    normal start, nothing for an operator to act on."""
    caplog.set_level(logging.INFO, logger="elasticity.state.restore")
    csm = manager(props(tmp_path, kafka_bootstrap))
    first = {t: CheckpointV2(CheckpointId.create(), {}, {}) for t in TASKS}
    assert {s for v in csm.restore(first).values() for s in v.values()} == {"bootstrap"}
    assert state(csm) == {}
    csm.close()
    logged = [r for r in caplog.records if r.name == "elasticity.state.restore"]
    assert logged and all(r.levelno == logging.INFO for r in logged), [(r.levelname, r.getMessage()) for r in logged]
    assert all("restored 0 records" in r.getMessage() for r in logged if "bootstrapping" in r.getMessage())


def test_uncommitted_changelog_records_are_trimmed(tmp_path, kafka_bootstrap):
    p = props(tmp_path, kafka_bootstrap)
    run(tmp_path / "w", 2, p)
    csm = manager(p)
    _, cps = committed(tmp_path / "w")
    csm.restore(cps)
    for t in TASKS:
        kv = csm.store(t, "counts")
        for k, v in list(kv.all()):
            kv.put(k, v + 1000)
    csm.snapshot(CheckpointId.create())  # flushed to the changelog, never committed
    csm.close()
    assert changelog_last_values(p, kafka_bootstrap) != reference(2)
    assert restored(tmp_path / "w", p, **{"job.state.dir": str(tmp_path / "fresh")}) == ({KAFKA}, reference(2))
    assert changelog_last_values(p, kafka_bootstrap) == reference(2)  # compaction can only keep committed values
    assert run(tmp_path / "w", 4, p) == reference(4)


def test_blob_store_on_s3(tmp_path, s3_server):
    p = props(tmp_path, s3=s3_server, backups="blobstore")
    run(tmp_path / "w", 2, p)
    assert run(tmp_path / "w", 4, p) == reference(4)
    assert restored(tmp_path / "w", p, **{"job.state.dir": str(tmp_path / "fresh")}) == ({BLOB}, reference(4))
    assert restored(tmp_path / "w", p, **{"job.state.dir": str(tmp_path / "fresh")}) == ({"local"}, reference(4))


def test_dual_commit_restores_from_each_backend_alone(tmp_path, kafka_bootstrap, s3_server):
    p = props(tmp_path, kafka_bootstrap, s3_server, backups="kafka,blobstore")
    assert run(tmp_path / "w", 3, p) == reference(3)
    _, cps = committed(tmp_path / "w")
    for cp in cps.values():
        assert set(cp.state_checkpoint_markers) == {KAFKA, BLOB} and all(
            "counts" in m for m in cp.state_checkpoint_markers.values()
        )
    for factory in (KAFKA, BLOB):
        fresh = {"job.state.dir": str(tmp_path / f"only-{factory[-20:]}"), "stores.counts.restore.factories": factory}
        assert restored(tmp_path / "w", p, **fresh) == ({factory}, reference(3))


def test_missing_marker_falls_back_to_the_next_factory(tmp_path, kafka_bootstrap, s3_server, caplog):
    p = props(tmp_path, kafka_bootstrap, s3_server, backups="kafka,blobstore", restores="blobstore,kafka")
    run(tmp_path / "w", 2, p)
    n, cps = committed(tmp_path / "w")
    kafka_only = {t: CheckpointV2(cp.checkpoint_id, {}, {KAFKA: cp.state_checkpoint_markers[KAFKA]}) for t, cp in cps.items()}
    shutil.rmtree(tmp_path / "state")
    csm = manager(p)
    assert {s for v in csm.restore(kafka_only).values() for s in v.values()} == {KAFKA}
    assert state(csm) == reference(2)
    csm.close()
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert errors and all("has no marker from org.apache.samza.storage.blobstore" in r.getMessage() for r in errors)


def test_a_dual_commit_store_moves_with_a_changelog_image_each_backend_restores_alone(tmp_path, kafka_bootstrap, s3_server):
    """Rescale 2 -> 3 of a kafka+blobstore store: the new changelog marker is the end of the image the move
    appended to each new task's changelog partition; restoring from either backend alone gives the same state."""
    from dataclasses import replace

    from elasticity.checkpoint.task_checkpoint import TaskCheckpoint
    from elasticity.state.rescale import move_state
    from tests.support.state_stores import COUNTS, commit, job_config, model, read, storage

    p = props(tmp_path, kafka_bootstrap, s3_server, backups="kafka,blobstore")
    old_cfg, new_cfg = job_config(tmp_path, 2, **p), job_config(tmp_path, 3, **p)
    st = storage(old_cfg)
    old_model, new_model = model(old_cfg, 1), model(new_cfg, 1)
    values = {f"user-{i}": {"n": i} for i in range(60)}
    entries = {t.task_name: {"counts": {}} for t in old_model.tasks()}
    for k, v in values.items():
        entries[next(t for t in entries if t.name.endswith(f"-{key_hash(k.encode()) % 2}-2"))]["counts"][k] = v
    entries[TaskName(f"Partition_0-{key_hash(b'gone') % 2}-2")]["counts"]["gone"] = {
        "n": -1
    }  # written, then deleted: a tombstone
    commit(st, old_model, entries)
    entries = {t: {"counts": {**e["counts"], "gone": None} if "gone" in e["counts"] else e["counts"]} for t, e in entries.items()}
    cps = commit(st, old_model, entries)
    assert all(set(cp.state_markers) == {KAFKA, BLOB} for cp in cps.values())
    move = move_state(st, [COUNTS], old_model, old_factor=2, from_generation=1, old_cps=cps, new_model=new_model, new_factor=3)
    new_cps = move.apply({t.task_name: TaskCheckpoint(task_name=t.task_name, offsets={}) for t in new_model.tasks()})
    assert all(set(cp.state_markers) == {KAFKA, BLOB} for cp in new_cps.values())
    expected = {}
    for k, v in values.items():
        expected.setdefault(TaskName(f"Partition_0-{key_hash(k.encode()) % 3}-3"), {})[k] = v
    for factory in (KAFKA, BLOB):
        alone = replace(st, stores=tuple(replace(s, restore_factories=(factory,)) for s in st.stores))
        got = read(alone, new_model, new_cps)
        assert {t: s["counts"] for t, s in got.items()} == expected, factory
