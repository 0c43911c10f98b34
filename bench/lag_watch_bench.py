"""The lag watcher's CPU (airflow.microbatch.trigger=lag): what JobLagTrigger costs the triggerer per job,
at its default poll (airflow.microbatch.lag.poll.ms=2000), side by side in one run:

  1. JobLagTrigger.run() as the triggerer runs it (a thread per poll, one consumer and one store held)
  2. its probe alone on a held consumer (HeldKafkaInputs), polled in a loop
  3. the same probe opening a new client per poll (KafkaInputs, as the operator's one-off probe does)

On the embedded broker (another process, left out) and a SQLite store; a job at factor 4 over a topic of 8
partitions, caught up (lag 0, what the watcher sees most of the time). CPU is this process's utime+stime
(every thread) over the stretch, as a share of one core.

usage: .venv/bin/python bench/lag_watch_bench.py [--seconds 40] [--poll-ms 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "include"))

from elasticity.airflow.lag_trigger import JobLagTrigger  # noqa: E402
from elasticity.batch.coordinator.job_coordinator import JobCoordinator  # noqa: E402
from elasticity.batch.coordinator.lag import LagProbe  # noqa: E402
from elasticity.checkpoint.store import CheckpointStore  # noqa: E402
from elasticity.config import load_config  # noqa: E402
from elasticity.kafka.admin import create_topic  # noqa: E402
from elasticity.kafka.consumer import HeldKafkaInputs, KafkaInputs  # noqa: E402
from elasticity.local.broker import EmbeddedBroker  # noqa: E402
from elasticity.local.daemon import free_port  # noqa: E402


def cpu() -> float:
    t = os.times()
    return t.user + t.system


def probe_loop(probe: LagProbe, seconds: float, poll_s: float) -> tuple[float, int]:
    start_cpu, end, polls = cpu(), time.monotonic() + seconds, 0
    while time.monotonic() < end:
        probe.observe()
        polls += 1
        time.sleep(poll_s)
    return cpu() - start_cpu, polls


async def trigger_loop(trigger: JobLagTrigger, seconds: float) -> float:
    async def run() -> None:
        async for _ in trigger.run():
            raise AssertionError("a caught-up job fired")

    start_cpu = cpu()
    task = asyncio.create_task(run())
    await asyncio.sleep(seconds)
    task.cancel()
    return cpu() - start_cpu


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=40.0)
    ap.add_argument("--poll-ms", type=int, default=2000)
    args = ap.parse_args()
    poll_s = args.poll_ms / 1000
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        broker = EmbeddedBroker(tmp / "home")
        bootstrap = broker.start(port=free_port()).bootstrap
        os.environ["KAFKA_BOOTSTRAP_SERVERS"] = bootstrap
        try:
            topic = f"lagbench-{uuid.uuid4().hex[:6]}"
            create_topic(bootstrap, topic, 8)
            path = tmp / "lagbench.properties"
            path.write_text(
                f"job.name=lagbench\ntask.inputs=kafka.{topic}\njob.elasticity.factor=4\n"
                f"task.checkpoint.store.url=sqlite:///{tmp / 'store.db'}\n"
            )
            config = load_config(path)
            store = CheckpointStore(config.checkpoint_store_url())
            JobCoordinator(config, store, KafkaInputs(config)).initialize()
            rows = []
            trigger = JobLagTrigger(job="lagbench", config_path=str(path), poll_ms=args.poll_ms)
            spent = asyncio.run(trigger_loop(trigger, args.seconds))
            rows.append(("JobLagTrigger.run(), held consumer", spent, args.seconds / poll_s))
            for name, inputs in (
                ("probe, held consumer", HeldKafkaInputs(config)),
                ("probe, a new client per poll", KafkaInputs(config)),
            ):
                probe = LagProbe(config, CheckpointStore(config.checkpoint_store_url()), inputs)
                probe.observe()  # the held consumer's bootstrap, once
                spent, polls = probe_loop(probe, args.seconds, poll_s)
                probe.close()
                rows.append((name, spent, polls))
        finally:
            broker.stop()
    print(f"job at factor 4 over 8 partitions, caught up; poll every {args.poll_ms} ms for {args.seconds:.0f} s each\n")
    print(f"{'':40s} {'CPU ms/poll':>12s} {'% of a core':>12s}")
    for name, spent, polls in rows:
        print(f"{name:40s} {1000 * spent / polls:12.1f} {100 * spent / args.seconds:12.2f}")
    held, fresh = rows[1][1], rows[2][1]
    print(f"\na new client per poll costs {fresh / held:.1f}x the held consumer's CPU")
    return 0


if __name__ == "__main__":
    import results

    sys.exit(results.run("lag_watch_bench", main))
