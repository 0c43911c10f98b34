"""The blob-store backend on a local folder: incremental uploads, Samza's SnapshotIndex,
retention, removal of what failed uploads left, checksums, restore without local state."""

import json
import logging
import shutil
import threading

import pytest

from elasticity import faults
from elasticity.checkpoint.task_checkpoint import CheckpointId, CheckpointV2
from elasticity.config import BLOB_STORE_FACTORY
from elasticity.jobmodel.model import TaskName
from elasticity.state.backends.blob_manager import ALIVE, FAILED, BlobStoreManager, UploadFailed, UploadStalled
from elasticity.state.backends.blobstore import LIST_EVERY, ChecksumMismatch, await_durable
from elasticity.state.backends.snapshot_index import SnapshotIndex
from elasticity.state.worker import Heartbeat
from tests.support import samza_rules
from tests.unit.test_state_store import commit, container

TASK = TaskName("Partition 0")
BLOB = {"stores.counts.backup.factories": "blobstore"}


@pytest.fixture
def csm(tmp_path):
    c = container(tmp_path, **BLOB)
    c.restore({})
    yield c
    c.close()


def backend(csm):
    return csm.tasks[TASK]["counts"].backends[BLOB_STORE_FACTORY]


def index_of(csm, cps) -> SnapshotIndex:
    return backend(csm).read_index(cps[TASK].state_checkpoint_markers[BLOB_STORE_FACTORY]["counts"])


def test_index_is_samzas_json_and_the_marker_is_its_blob_id(csm):
    csm.store(TASK, "counts").put_all({f"k{i}": i for i in range(1000)})
    cps = commit(csm)
    marker = cps[TASK].state_checkpoint_markers[BLOB_STORE_FACTORY]["counts"]
    d = json.loads(backend(csm).blobs.get_bytes(marker))
    assert set(d) == {"creation-time-millis", "snapshot-metadata", "dir-index", "prev-snapshot-index-blob-id"}
    assert d["snapshot-metadata"] == {
        "checkpoint-id": str(cps[TASK].checkpoint_id),
        "job-name": "j",
        "job-id": "1",
        "task-name": "Partition 0",
        "store-name": "counts",
    }
    assert set(d["dir-index"]) == {"dir-name", "files-present", "files-removed", "sub-dirs-present", "sub-dirs-removed"}
    f = next(f for f in d["dir-index"]["files-present"] if f["blobs"])  # an empty file has none
    assert set(f) == {"file-name", "blobs", "file-metadata", "checksum"} and set(f["blobs"][0]) == {"blob-id", "offset"}
    assert set(f["file-metadata"]) == {
        "creation-time-millis",
        "last-modified-time-millis",
        "size",
        "owner",
        "group",
        "permissions",
    }
    assert d["prev-snapshot-index-blob-id"] is None
    raw = backend(csm).blobs.get_bytes(marker)
    assert SnapshotIndex.from_json(raw.decode()).to_json().encode() == raw  # Samza's bytes: field order, compact
    samza_rules.snapshot_index(raw)  # what Samza's SnapshotIndexSerde requires of every field


def test_only_new_files_are_uploaded(csm):
    kv = csm.store(TASK, "counts")
    kv.put_all({f"k{i:05d}": "x" * 50 for i in range(20_000)})
    first = index_of(csm, cps1 := commit(csm))
    full = csm.metrics()[TASK]["counts"].bytes_uploaded
    kv.put_all({f"k{i:05d}": "y" * 50 for i in range(0, 20_000, 100)})  # 1 %
    second = index_of(csm, commit(csm))
    delta = csm.metrics()[TASK]["counts"].bytes_uploaded
    ssts = {f.file_name: f for f in first.files_present if f.file_name.endswith(".sst")}
    reused = [f for f in second.files_present if f.file_name in ssts]
    assert reused and all(f.blobs == ssts[f.file_name].blobs for f in reused)
    assert second.prev_snapshot_index_blob_id == cps1[TASK].state_checkpoint_markers[BLOB_STORE_FACTORY]["counts"]
    assert delta < full * 0.2


def test_a_reopened_store_uploads_its_new_files_only_and_restores_whole(tmp_path):
    """Each open writes a new OPTIONS file with the same bytes and an empty WAL: the snapshot after a
    reopen points at the previous snapshot's blob for equal bytes and at no blob for an empty file, so
    it uploads its new SST, MANIFEST and CURRENT (and its index); a restore from it alone is whole."""
    csm = container(tmp_path, **BLOB)
    csm.restore({})
    csm.store(TASK, "counts").put_all({f"k{i}": i for i in range(300)})
    cps = commit(csm)
    first = index_of(csm, cps)
    for i in range(2):  # closed after its snapshot, as a slice ends, and reopened by the next batch
        csm.release([TASK])
        csm.restore(cps)
        csm.store(TASK, "counts").put_all({f"k{i}": -i for i in range(100 * i, 100 * i + 100)})
        cps = commit(csm)
    last = index_of(csm, cps)
    uploaded = {f.file_name for f in last.files_present if any(str(cps[TASK].checkpoint_id) in b.blob_id for b in f.blobs)}
    assert {n.split("-")[0].rsplit(".", 1)[-1] for n in uploaded} == {"sst", "MANIFEST", "CURRENT"}
    options = [f for f in (*first.files_present, *last.files_present) if f.file_name.startswith("OPTIONS-")]
    assert len({f.file_name for f in options}) == 2 and len({f.blobs for f in options}) == 1
    removed = {b for f in last.files_removed for b in f.blobs}
    assert removed and not removed & {b for f in last.files_present for b in f.blobs}  # Samza's cleanUp deletes these
    assert all(f.blobs == () for f in last.files_present if f.size == 0)
    assert any(f.size == 0 for f in last.files_present)  # the WAL (disabled) of each open
    csm.close()
    shutil.rmtree(tmp_path / "state")
    again = container(tmp_path, **BLOB)
    assert again.restore(cps) == {TASK: {"counts": BLOB_STORE_FACTORY}}
    expected = {f"k{i}": i for i in range(300)} | {f"k{i}": -i for i in range(200)}
    assert dict(again.store(TASK, "counts").all()) == expected
    again.close()


def test_retention_keeps_the_last_snapshots_and_deletes_the_rest(tmp_path):
    csm = container(tmp_path, **BLOB, **{"stores.counts.blob.retain": "2"})
    csm.restore({})
    markers = []
    for i in range(4):
        csm.store(TASK, "counts").put(f"k{i}", i)
        markers.append(commit(csm)[TASK].state_checkpoint_markers[BLOB_STORE_FACTORY]["counts"])
    b = backend(csm)
    present = set(b.blobs.list(b.prefix))
    assert markers[3] in present and markers[2] in present and markers[1] not in present and markers[0] not in present
    assert present == b.read_index(markers[3]).blob_ids() | b.read_index(markers[2]).blob_ids() | {markers[2], markers[3]}
    csm.close()


def test_cleanup_removes_what_a_failed_upload_left(csm):
    csm.store(TASK, "counts").put("a", 1)
    commit(csm)
    csm.store(TASK, "counts").put("b", 2)
    snaps = csm.snapshot(CheckpointId.create())
    with faults.raise_at("state.blob.index_uploaded"), pytest.raises(faults.InjectedFault):
        csm.upload(snaps)
    b = backend(csm)
    orphans = set(b.blobs.list(b.prefix))
    cps = commit(csm)
    left = set(b.blobs.list(b.prefix))
    kept = index_of(csm, cps).blob_ids() | {cps[TASK].state_checkpoint_markers[BLOB_STORE_FACTORY]["counts"]}
    prev = b.read_index(index_of(csm, cps).prev_snapshot_index_blob_id)
    assert left == kept | prev.blob_ids() | {index_of(csm, cps).prev_snapshot_index_blob_id}
    assert orphans - left  # the failed upload's blobs are gone


def test_steady_commits_neither_list_nor_read_indexes(csm):
    """Each batch of a virtual task commits and cleans up: the requests that costs on an object store
    are its uploads and deletes; its prefix is listed once per LIST_EVERY cleanups."""
    b = backend(csm)
    calls = {"list": 0, "get_bytes": 0}

    def counting(name):
        real = getattr(b.blobs, name)

        def counted(*args):
            calls[name] += 1
            return real(*args)

        return counted

    for name in calls:
        setattr(b.blobs, name, counting(name))
    markers = []
    for i in range(2 * LIST_EVERY + 1):
        csm.store(TASK, "counts").put(f"k{i}", i)
        markers.append(commit(csm)[TASK].state_checkpoint_markers[BLOB_STORE_FACTORY]["counts"])
    assert calls == {"list": 3, "get_bytes": 0}
    present = set(b.blobs.list(b.prefix))
    assert present == b.read_index(markers[-1]).blob_ids() | b.read_index(markers[-2]).blob_ids() | set(markers[-2:])


def test_blobs_another_process_left_go_at_the_next_listing(csm):
    b = backend(csm)
    commit(csm)  # lists: what is there now is known
    stale = f"{b.prefix}files/{CheckpointId.create()}-0000-000009.sst"  # an old snapshot's file, another uploader's
    commit(csm)
    b.blobs.put_bytes(stale, b"left by a crashed upload elsewhere")
    for _ in range(LIST_EVERY - 2):
        commit(csm)
    assert b.blobs.exists(stale)  # unknown here until the prefix is listed again
    commit(csm)
    assert not b.blobs.exists(stale)


def test_restore_without_local_state_downloads_and_checks(tmp_path):
    csm = container(tmp_path, **BLOB)
    csm.restore({})
    csm.store(TASK, "counts").put_all({f"k{i}": i for i in range(500)})
    cps = commit(csm)
    csm.close()
    shutil.rmtree(tmp_path / "state")
    again = container(tmp_path, **BLOB)
    assert again.restore(cps) == {TASK: {"counts": BLOB_STORE_FACTORY}}
    assert dict(again.store(TASK, "counts").all()) == {f"k{i}": i for i in range(500)}
    again.close()
    shutil.rmtree(tmp_path / "state")
    sst = next(f for f in index_of(again, cps).files_present if f.file_name.endswith(".sst"))
    blob = tmp_path / "blobs" / sst.blobs[0].blob_id
    blob.write_bytes(blob.read_bytes()[:-1] + b"\0")
    third = container(tmp_path, **BLOB)
    with pytest.raises(ChecksumMismatch, match=sst.file_name):
        third.restore(cps)
    third.close()


def test_a_missing_marker_logs_an_error_and_falls_back(tmp_path, caplog):
    csm = container(tmp_path, **BLOB)
    csm.restore({})
    csm.store(TASK, "counts").put("a", 1)
    cps = commit(csm)
    csm.close()
    shutil.rmtree(tmp_path / "state")
    without = {TASK: type(cps[TASK])(cps[TASK].checkpoint_id, {}, {})}
    again = container(tmp_path, **BLOB)
    assert again.restore(without) == {TASK: {"counts": "empty"}}
    assert "has no marker from org.apache.samza.storage.blobstore.BlobStoreStateBackendFactory" in caplog.text
    assert any(r.levelname == "ERROR" for r in caplog.records)
    again.close()


def test_a_first_start_with_no_snapshot_yet_logs_info_not_error(tmp_path, caplog):
    """A new job's first batch: its checkpoint has an id but no marker, and the blob store has no snapshot of
    the store: a normal start, nothing for an operator to act on."""
    caplog.set_level(logging.INFO, logger="elasticity.state.restore")
    csm = container(tmp_path, **BLOB)
    first = {TASK: CheckpointV2(CheckpointId.create(), {}, {})}
    assert csm.restore(first) == {TASK: {"counts": "empty"}}
    csm.close()
    logged = [r for r in caplog.records if r.name == "elasticity.state.restore"]
    assert logged and "starting empty" in caplog.text
    assert all(r.levelno == logging.INFO for r in logged)


def test_a_snapshot_samza_wrote_restores_here(tmp_path):
    """An index as Samza's SnapshotIndexSerde writes it, under another blob naming, with a file uploaded in
    chunks (FileBlob offsets) and another user's POSIX metadata: the store restores from it."""
    csm = container(tmp_path, **BLOB)
    csm.restore({})
    csm.store(TASK, "counts").put_all({f"k{i}": i for i in range(300)})
    cps = commit(csm)
    ours = index_of(csm, cps)
    csm.close()
    shutil.rmtree(tmp_path / "state")
    blobs = tmp_path / "blobs"
    files = []
    for f in ours.files_present:
        data = (blobs / f.blobs[0].blob_id).read_bytes() if f.blobs else b""
        chunks = [(0, data[: len(data) // 2]), (len(data) // 2, data[len(data) // 2 :])] if data else []  # empty: no blob
        for offset, chunk in chunks:
            (blobs / "samza" / f"{f.file_name}-{offset}").parent.mkdir(exist_ok=True)
            (blobs / "samza" / f"{f.file_name}-{offset}").write_bytes(chunk)
        meta = {"creation-time-millis": 1, "last-modified-time-millis": 2, "size": len(data)}
        files.append(
            {
                "file-name": f.file_name,
                "blobs": [{"blob-id": f"samza/{f.file_name}-{o}", "offset": o} for o, _ in chunks],
                "file-metadata": {**meta, "owner": "samza", "group": "samza", "permissions": "rw-r--r--"},
                "checksum": f.checksum,
            }
        )
    cid = str(cps[TASK].checkpoint_id)
    index = {
        "creation-time-millis": 3,
        "snapshot-metadata": {
            "checkpoint-id": cid,
            "job-name": "j",
            "job-id": "1",
            "task-name": "Partition 0",
            "store-name": "counts",
        },
        "dir-index": {
            "dir-name": "",
            "files-present": files,
            "files-removed": [],
            "sub-dirs-present": [],
            "sub-dirs-removed": [],
        },
        "prev-snapshot-index-blob-id": None,
    }
    (blobs / "samza" / "index").write_text(json.dumps(index))
    samza_rules.snapshot_index((blobs / "samza" / "index").read_bytes())
    from_samza = {TASK: type(cps[TASK])(cps[TASK].checkpoint_id, {}, {BLOB_STORE_FACTORY: {"counts": "samza/index"}})}
    again = container(tmp_path, **BLOB)
    assert again.restore(from_samza) == {TASK: {"counts": BLOB_STORE_FACTORY}}
    assert dict(again.store(TASK, "counts").all()) == {f"k{i}": i for i in range(300)}
    again.close()


def test_an_upload_whose_uploader_stops_beating_is_given_up_long_before_the_timeout(tmp_path):
    blobs = BlobStoreManager(str(tmp_path / "blobs"))
    index = "job/task/store/index/1-2-abc.json"
    beat = Heartbeat(blobs, interval_s=0.05)
    beat.add([index])  # an upload that is slow but alive: its heartbeat keeps the driver waiting
    writer = threading.Timer(0.8, blobs.put_bytes, (index, b"{}"))
    writer.start()
    blobs.await_blob(index, timeout_s=60, stall_s=0.3)
    beat.done([index])
    assert not blobs.exists(index + ALIVE)  # the heartbeat cleans up after itself

    lost = "job/task/store/index/1-3-abc.json"
    blobs.put_bytes(lost + ALIVE, b"1")  # one beat, then the uploader's executor is gone: no index, no .failed
    with pytest.raises(UploadStalled, match="stalled: no sign of life from its uploader"):
        blobs.await_blob(lost, timeout_s=60, stall_s=0.3)  # not the 60 s timeout


def test_a_batch_is_durable_once_every_index_exists_and_fails_on_any_failed_one(tmp_path):
    blobs = BlobStoreManager(str(tmp_path / "blobs"))
    indexes = [f"job/task-{i}/store/index/1-2-abc.json" for i in range(20)]
    markers = [{BLOB_STORE_FACTORY: {"store": index}} for index in indexes]
    late = [threading.Timer(0.1 + i * 0.01, blobs.put_bytes, (index, b"{}")) for i, index in enumerate(reversed(indexes))]
    for t in late:
        t.start()
    await_durable(blobs, markers, timeout_s=30)
    assert all(blobs.exists(index) for index in indexes)

    failing = [f"job/task-{i}/store/index/1-3-abc.json" for i in range(20)]
    for index in failing[:-1]:
        blobs.put_bytes(index, b"{}")
    blobs.put_bytes(failing[-1] + FAILED, b"OSError: disk full")  # the last one's uploader gave up
    with pytest.raises(UploadFailed, match="disk full"):
        await_durable(blobs, [{BLOB_STORE_FACTORY: {"store": index}} for index in failing], timeout_s=30)


def test_a_reader_awaiting_a_blob_never_reads_it_half_written(tmp_path):
    """Another process's upload of the base index is awaited (`await_blob`), then read: on a local folder a
    file exists from its creation, so a blob must appear whole, as an object store's PUT does."""
    blobs = BlobStoreManager(str(tmp_path / "blobs"))
    local = tmp_path / "big.sst"
    local.write_bytes(bytes(range(256)) * (256 << 10))  # 64 MiB: put in 4 MiB pieces, for long enough to be seen
    for n in range(5):
        blob, seen = f"t/files/{n}.sst", []
        reader = threading.Thread(target=lambda b=blob, s=seen: s.append(blobs.await_blob(b, 30) or len(blobs.get_bytes(b))))
        reader.start()
        blobs.put_file(local, blob)
        reader.join(30)
        assert seen == [local.stat().st_size], f"read {seen} of {local.stat().st_size} bytes"
    assert blobs.list("t/") == [f"t/files/{n}.sst" for n in range(5)]  # no part file left


def test_a_writer_that_fails_half_way_leaves_no_blob(tmp_path):
    blobs = BlobStoreManager(str(tmp_path / "blobs"))
    with pytest.raises(TypeError):
        blobs.put_bytes("t/files/a.sst", object())  # the write fails once its file was opened
    assert blobs.list("t/") == [] and not blobs.exists("t/files/a.sst")
