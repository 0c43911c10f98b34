"""State benchmark: every figure is measured side by side in one run and printed
as a ratio, because absolute times drift on a shared machine.

  1. restore of a 1M-key store: blob store (SeaweedFS S3 on loopback) over changelog replay (goal >= 5x)
  2. bytes uploaded after updating 1 % of the keys, over the store's size (goal <= 0.05)
  3. batch time with a 2 s upload, async (overlapping the next batch) over sync (goal: hides >= 80 %)
  4. restart with a matching local store (goal < 1 s)

usage: PYTHONPATH=include:. python bench/state_bench.py [--keys 1000000]
Uses KAFKA_BOOTSTRAP_SERVERS, or starts an embedded broker of its own. About 4 minutes on 2 cores,
most of it the first commit sending 1M records to the changelog with kafka-python.

Measured here (2 cores, embedded broker, SeaweedFS on loopback):
  bytes uploaded after updating 1 %               | 118,984 of 14,599,277 bytes | 0.0081 (goal <= 0.05)
  restore 1,000,000 keys: blob store vs changelog | 0.25 s vs 33.91 s           | 134.7x (goal >= 5x)
  restart with a matching local store             | 40 ms                       | goal < 1000 ms
  batch with a 2 s upload: async vs sync          | 2.54 s vs 4.55 s per batch  | hides 100% of the upload (goal >= 80%)
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from elasticity import faults
from elasticity.checkpoint.model import CheckpointId, CheckpointV2
from elasticity.config import validate
from elasticity.kafka.broker import EmbeddedBroker, free_port
from elasticity.model import TaskModel, TaskName
from elasticity.state import ContainerStorageManager, StorageConfig, StoreDescriptor
from elasticity.state.rocksdb import snapshot_files
from tests.s3server import SeaweedS3

TASK = TaskName("Partition 0")
STORE = StoreDescriptor("bench", "string", "json")


def container(props: dict[str, str]) -> ContainerStorageManager:
    config = validate({"job.name": "state-bench", "task.inputs": "kafka.in", "task.checkpoint.read.versions": "2,1", **props})
    return ContainerStorageManager(StorageConfig.of(config, [STORE]), [STORE], [TaskModel(TASK, frozenset(), 0)], 1)


def commit(csm: ContainerStorageManager) -> dict[TaskName, CheckpointV2]:
    cp_id = CheckpointId.create()
    markers = csm.upload(csm.snapshot(cp_id))
    cps = {t: CheckpointV2(cp_id, {}, m) for t, m in markers.items()}
    csm.cleanup(cps)
    return cps


def timed_restore(props: dict[str, str], cps) -> tuple[float, str]:
    csm = container(props)
    try:
        start = time.perf_counter()
        sources = csm.restore(cps)
        elapsed = time.perf_counter() - start
        assert csm.store(TASK, "bench").get("key-0000000") is not None
        return elapsed, sources[TASK]["bench"]
    finally:
        csm.close()


def batches(props: dict[str, str], n: int, process_s: float, upload_s: float, overlap: bool) -> float:
    """Mean time per batch, until processing may resume: process (simulated I/O), snapshot, and an
    upload slowed by `upload_s` that either runs before the next batch or overlaps it."""

    def slow(point: str) -> None:
        if point == "state.blob.index_uploaded":
            time.sleep(upload_s)

    csm = container(props)
    csm.restore({})
    pool = ThreadPoolExecutor(1)  # the engine's commit thread
    running = None
    try:
        with faults.hook(slow):
            start = time.perf_counter()
            for b in range(n):
                kv = csm.store(TASK, "bench")
                kv.put_all({f"key-{i:07d}": b for i in range(b, 100_000, 50)})
                time.sleep(process_s)
                if running is not None:
                    running.result()  # one commit at a time
                snaps = csm.snapshot(CheckpointId.create())
                running = pool.submit(csm.upload, snaps)
                if not overlap:
                    running.result()
            elapsed = time.perf_counter() - start  # until processing could resume after the last batch
            running.result()
            return elapsed / n
    finally:
        pool.shutdown()
        csm.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--keys", type=int, default=1_000_000)
    args = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="elasticity-state-bench-"))
    os.environ.setdefault("ELASTICITY_HOME", str(tmp / "home"))
    broker = None
    bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if not bootstrap:
        broker = EmbeddedBroker(tmp / "broker")
        bootstrap = broker.start(port=free_port()).bootstrap
    s3 = SeaweedS3(tmp / "s3").start()
    rows: list[tuple[str, str, str]] = []
    try:
        props = {
            "job.state.dir": str(tmp / "state"), "blob.store.uri": s3.uri(f"bench-{uuid.uuid4().hex[:6]}"),
            "stores.bench.backup.factories": "kafka,blobstore", "stores.bench.changelog": f"kafka.bench-{uuid.uuid4().hex[:6]}",
            "systems.kafka.consumer.bootstrap.servers": bootstrap,
        }
        csm = container(props)
        csm.restore({})
        kv = csm.store(TASK, "bench")
        t = time.perf_counter()
        for lo in range(0, args.keys, 100_000):
            kv.put_all({f"key-{i:07d}": {"n": i, "total": i * 3} for i in range(lo, min(lo + 100_000, args.keys))})
        load_s = time.perf_counter() - t
        t = time.perf_counter()
        commit(csm)
        first_s = time.perf_counter() - t
        kv.put_all({f"key-{i:07d}": {"n": -i, "total": 0} for i in range(0, args.keys, 100)})  # 1 %
        cps = commit(csm)
        m = csm.metrics()[TASK]["bench"]
        folder = csm.tasks[TASK]["bench"].dirs.checkpoint(cps[TASK].checkpoint_id)
        size = sum(f.stat().st_size for f in snapshot_files(folder))
        csm.close()
        rows.append((f"load {args.keys:,} keys, first dual commit", f"{load_s:.1f} s puts, {first_s:.1f} s commit", "(setup)"))
        rows.append(("bytes uploaded after updating 1 %", f"{m.bytes_uploaded:,} of {size:,} bytes", f"{m.bytes_uploaded / size:.4f} (goal <= 0.05)"))

        blob_s, src_b = timed_restore({**props, "job.state.dir": str(tmp / "blob"), "stores.bench.restore.factories": "blobstore"}, cps)
        log_s, src_k = timed_restore({**props, "job.state.dir": str(tmp / "log"), "stores.bench.restore.factories": "kafka"}, cps)
        assert "blobstore" in src_b and "Kafka" in src_k, (src_b, src_k)
        rows.append((f"restore {args.keys:,} keys: blob store vs changelog", f"{blob_s:.2f} s vs {log_s:.2f} s", f"{log_s / blob_s:.1f}x (goal >= 5x)"))
        local_s, src = timed_restore(props, cps)
        assert src == "local", src
        rows.append(("restart with a matching local store", f"{local_s * 1000:,.0f} ms", "goal < 1000 ms"))

        small = {"job.state.dir": str(tmp / "async"), "blob.store.uri": str(tmp / "blobs"), "stores.bench.backup.factories": "blobstore"}
        sync_s = batches({**small, "job.state.dir": str(tmp / "sync")}, 4, 2.5, 2.0, overlap=False)
        async_s = batches(small, 4, 2.5, 2.0, overlap=True)
        rows.append(("batch with a 2 s upload: async vs sync", f"{async_s:.2f} s vs {sync_s:.2f} s per batch",
                     f"hides {(sync_s - async_s) / 2.0:.0%} of the upload (goal >= 80%)"))
    finally:
        s3.stop()
        if broker:
            broker.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    width = max(len(r[0]) for r in rows)
    print(f"\n{'measure':{width}s} | {'figures':45s} | ratio")
    print(f"{'-' * width}-|-{'-' * 45}-|------")
    for name, fig, ratio in rows:
        print(f"{name:{width}s} | {fig:45s} | {ratio}")


if __name__ == "__main__":
    main()
