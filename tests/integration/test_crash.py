"""Crash injection at every step of a commit and of a rescale, on SQLite and
PostgreSQL: afterwards the store holds the old or the new generation, never a
mix, and running again completes with nothing lost and nothing processed twice."""

import os
import subprocess
import sys

import pytest
from sqlalchemy import func, select

from elasticity import faults
from elasticity.checkpoint import store as st
from tests.conftest import REPO
from tests.support.crash_driver import OWNER, runner

COMMIT_POINTS = [
    "plan.after_commit",
    "commit.fenced",
    "commit.plan_marked",
    "commit.checkpoints_written",
    "commit.before_commit",
    "commit.after_commit",
]
RESCALE_POINTS = [
    "rescale.lease_acquired",
    "rescale.fenced",
    "rescale.generation_written",
    "rescale.checkpoints_written",
    "rescale.after_commit",
]


def assert_one_whole_generation(store, job) -> int:
    """The current generation exists, its checkpoints cover exactly its tasks, and nothing newer was left behind."""
    with store.engine.connect() as conn:
        current = conn.execute(select(st.jobs.c.generation).where(st.jobs.c.job_name == job)).scalar()
        newest = conn.execute(select(func.max(st.generations.c.generation)).where(st.generations.c.job_name == job)).scalar()
        stray = conn.execute(
            select(func.count())
            .select_from(st.checkpoints)
            .where(st.checkpoints.c.job_name == job, st.checkpoints.c.generation > current)
        ).scalar()
    assert newest == current and stray == 0
    generation = store.generation(job)
    tasks = {t.task_name for t in generation.job_model.tasks()}
    cps = store.checkpoints(job, generation.number, (2, 1))
    assert set(cps) == tasks
    for t in generation.job_model.tasks():
        assert set(cps[t.task_name].offsets) == set(t.system_stream_partitions)
    return generation.number


def prepared(store_url, job_name):
    r = runner(store_url, job_name)
    r.run_batch(50, budgets={})
    r.run_batch(50, budgets={t: 2 for t in list(r.coordinator.checkpoints(r.coordinator.current()))[:1]})  # offsets drift apart
    return r


@pytest.mark.parametrize("point", COMMIT_POINTS)
def test_commit_crash_then_rerun(store_url, job_name, point):
    r = prepared(store_url, job_name)
    before = r.coordinator.checkpoints(r.coordinator.current())
    with faults.raise_at(point) as seen, pytest.raises(faults.InjectedFault):
        r.run_batch(50)
    assert point in seen
    assert assert_one_whole_generation(r.coordinator.store, job_name) == 1
    after = r.coordinator.checkpoints(r.coordinator.current())
    assert (after != before) == (point == "commit.after_commit")  # all tasks committed, or none
    r.drain()
    r.assert_everything_processed_once()
    r.assert_key_order()


@pytest.mark.parametrize("point", RESCALE_POINTS)
def test_rescale_crash_then_rerun(store_url, job_name, point):
    r = prepared(store_url, job_name)
    with faults.raise_at(point), pytest.raises(faults.InjectedFault):
        r.coordinator.rescale(3)
    generation = assert_one_whole_generation(r.coordinator.store, job_name)
    assert generation == (2 if point == "rescale.after_commit" else 1)
    assert r.coordinator.store.lease(job_name) is None  # released on the way out
    r.coordinator.rescale(3)
    assert r.coordinator.current().factor == 3
    r.drain()
    r.assert_everything_processed_once()
    r.assert_key_order()


@pytest.mark.parametrize("op,point", [("batch", p) for p in COMMIT_POINTS] + [("rescale", p) for p in RESCALE_POINTS])
def test_killed_process_leaves_one_whole_generation(store_url, job_name, op, point):
    r = prepared(store_url, job_name)
    args = [sys.executable, "-m", "tests.support.crash_driver", store_url, job_name, op] + (["5"] if op == "rescale" else [])
    env = {**os.environ, "ELASTICITY_FAULT": f"{point}:kill"}
    done = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 137, done.stderr  # killed at the point, no cleanup ran
    generation = assert_one_whole_generation(r.coordinator.store, job_name)
    if op == "rescale":
        assert generation == (2 if point == "rescale.after_commit" else 1)
    # running again completes: the same owner retakes its lease, a pending plan replays
    rerun = subprocess.run(
        args,
        cwd=REPO,
        env={k: v for k, v in os.environ.items() if k != "ELASTICITY_FAULT"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert rerun.returncode == 0, rerun.stderr
    assert_one_whole_generation(r.coordinator.store, job_name)
    if op == "rescale":
        assert r.coordinator.current().factor == 5
        r.coordinator.store.release_lease(job_name, OWNER)
