"""Runs one batch or one rescale of a deterministic job in its own process, so
that a test can kill it at a fault point (ELASTICITY_FAULT=<point>:kill).

usage: python -m tests.support.crash_driver STORE_URL JOB (batch | rescale FACTOR)
"""

from __future__ import annotations

import sys

from elasticity.batch.coordinator.job_coordinator import JobCoordinator
from elasticity.checkpoint.store import CheckpointStore
from elasticity.config import JobConfig, validate
from elasticity.jobmodel.model import SystemStream
from tests.support.memory import MemoryInputs, ReferenceRunner

STREAM = SystemStream("kafka", "orders")
OWNER = "crash-driver"


def job_config(job: str) -> JobConfig:
    return validate(
        {
            "job.name": job,
            "task.inputs": str(STREAM),
            "job.elasticity.factor": "2",
            "systems.kafka.default.stream.samza.offset.default": "oldest",
            "task.checkpoint.read.versions": "2,1",
        }
    )


def inputs() -> MemoryInputs:
    mem = MemoryInputs()
    mem.create(STREAM, 2)
    for i in range(300):
        mem.produce(STREAM, None if i % 17 == 0 else b"k%d" % (i % 23), b"%d" % i)
    return mem


def runner(store_url: str, job: str) -> ReferenceRunner:
    mem = inputs()
    return ReferenceRunner(JobCoordinator(job_config(job), CheckpointStore(store_url), mem), mem)


def main(argv: list[str]) -> None:
    url, job, op, *rest = argv
    r = runner(url, job)
    if op == "batch":
        r.run_batch(40, owner=OWNER)
    else:
        r.coordinator.rescale(int(rest[0]), owner=OWNER)


if __name__ == "__main__":
    main(sys.argv[1:])
