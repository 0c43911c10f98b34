"""SIGKILL at each step of a stateful commit (snapshot, upload, checkpoint write,
cleanup), with dual commit (Kafka changelog + blob store): afterwards every
restore path - the local store, the changelog alone, the blob store alone -
yields exactly the last committed state, and running on completes the job with
the state of the reference."""

import json
import os
import subprocess
import sys

import pytest

from elasticity.config import BLOB_STORE_FACTORY as BLOB
from elasticity.config import KAFKA_CHANGELOG_FACTORY as KAFKA
from tests.conftest import REPO
from tests.integration.test_state_backends import props, restored
from tests.support.state_job import committed, reference, run

POINTS = [
    "state.snapshot.checkpoint_created",
    "state.changelog.flushed",
    "state.snapshot.done",
    "state.blob.file_uploaded",
    "state.blob.index_uploaded",
    "state.upload.done",
    "driver.checkpoint_written",
    "state.blob.deleted",
    "state.cleanup.local_deleted",
]


@pytest.mark.parametrize("point", POINTS)
def test_kill_during_commit_then_restore_and_rerun(tmp_path, kafka_bootstrap, point):
    p = props(tmp_path, kafka_bootstrap, backups="kafka,blobstore")
    work = tmp_path / "w"
    run(work, 2, p)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "include"), str(REPO)])}
    proc = subprocess.run(
        [sys.executable, "-m", "tests.support.state_job", str(work), "4", json.dumps(p), point, "2"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == -9, proc.stderr[-2000:]  # killed at the point, in batch 2
    n, _ = committed(work)
    assert n == (3 if point in ("driver.checkpoint_written", "state.blob.deleted", "state.cleanup.local_deleted") else 2)
    assert restored(work, p) == ({"local"}, reference(n))
    for i, factory in enumerate((KAFKA, BLOB)):
        fresh = {"job.state.dir": str(tmp_path / f"only-{i}"), "stores.counts.restore.factories": factory}
        assert restored(work, p, **fresh) == ({factory}, reference(n))
    assert run(work, 5, p) == reference(5)
    for i, factory in enumerate((KAFKA, BLOB)):
        fresh = {"job.state.dir": str(tmp_path / f"end-{i}"), "stores.counts.restore.factories": factory}
        assert restored(work, p, **fresh) == ({factory}, reference(5))
