"""The autosizer against a changing load, through Airflow's scheduler on the embedded default: the embedded
broker, a warm Spark Connect server (local[2]), `airflow standalone` on a free loopback port, the demo app
(a 20 ms lookup per record) on 4 partitions, runs started by the lag watcher in the triggerer.

  1. the oracle: job `oracle` (no autosizer) drains a backlog (3,000 records per unit of factor) at each factor
     in turn (rescaled through elastic_rescale); its throughput per factor is records over the batches' time. The oracle's factor for
     a rate is the smallest whose measured throughput covers the rate with 20 % headroom;
  2. job `auto` (job.elasticity.autosize=true) under a stepped load fed at a steady rate (default 100 -> 800
     -> 200 records/s, `--step-s` each); every `--sample-s` the bench reads its factor and its exact lag;
  3. per step: the factors the autosizer chose and when, the rescales to settle, the time from the step to the
     settled factor, the settled factor against the oracle's, the peak lag and the time until the lag is back
     under target (at most `target.lag.seconds` of input), and direction reversals;
  4. the controller's cost: CPU time per poll of its loop (AutosizeProbe.decide, as the triggerer runs it, on
     the live job), as a share of a core at its poll interval; and the triggerer process's CPU over the run.

The controller before this one (a cron DAG every 5 minutes, wall-clock rates, linear in the factor) is not
run: it was removed, and its first step came up to 15 minutes after a load change by construction.

usage: python bench/autosize_bench.py [--rates 100,800:900,200] [--step-s 240] [--svg docs/results/autosize.svg]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "include"))
os.environ.setdefault("ELASTICITY_PROJECT_DIR", str(REPO))

from elasticity.apps.demo_feed import demo_records  # noqa: E402
from elasticity.checkpoint.store import CheckpointStore  # noqa: E402
from elasticity.kafka.admin import create_topic  # noqa: E402
from elasticity.kafka.producer import send  # noqa: E402
from elasticity.local.broker import EmbeddedBroker  # noqa: E402
from elasticity.local.connect_server import SparkConnectServer  # noqa: E402
from elasticity.local.daemon import free_port  # noqa: E402
from elasticity.local.standalone import AirflowStandalone, connections  # noqa: E402

PARTITIONS = 4
KEYS = 3000
HEADROOM = 1.2  # the oracle's: the smallest factor whose measured throughput covers the rate x 1.2
# the autosizer as the bench runs it: the defaults but the cool-downs, shortened to fit the steps, and the
# utilisation target, the oracle's headroom (1 / 1.2), so that both size for the same 20 % (the default 0.7 is 43 %)
KNOBS = {
    "job.elasticity.autosize.max": "12",
    "job.elasticity.autosize.target.lag.seconds": "60",
    "job.elasticity.autosize.catch.up.seconds": "300",
    "job.elasticity.autosize.utilization.target": f"{1 / HEADROOM:.3f}",
    "job.elasticity.autosize.scale.up.cooldown.ms": "60000",
    "job.elasticity.autosize.scale.down.cooldown.ms": "180000",
    "job.elasticity.autosize.scale.down.utilization": "0.4",
    "job.elasticity.autosize.confirm.ms": "20000",
    "job.elasticity.autosize.poll.ms": "5000",
}


def job_config(folder: Path, name: str, topic: str, **extra: str) -> str:
    demo = (REPO / "include" / "jobs" / "demo.properties").read_text()
    skip = ("job.name", "task.inputs", "app.class", "stores.", "task.checkpoint.read.versions", "job.elasticity", "#")
    lines = [line for line in demo.splitlines() if line and not line.startswith(skip)]
    props = {
        "job.name": name,
        "task.inputs": f"kafka.{topic}",
        "app.class": "elasticity.apps.enrichment:build",
        "job.elasticity.factor": "1",
        "airflow.microbatch.max.seconds": "600",
        "job.output.path": f"{folder}/{name}/out",
        "job.audit.path": f"{folder}/{name}/audit",
        "job.dead.letter.path": f"{folder}/{name}/dlq",
        "job.report.path": f"{folder}/{name}/reports",
        **extra,
    }
    return "\n".join([*lines, *(f"{k}={v}" for k, v in props.items())]) + "\n"


class Feeder(threading.Thread):
    """Records to a topic at `rate` per second (changed on the fly), sent once a second."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.rate, self.sent, self.stop = 0.0, 0, threading.Event()

    def run(self) -> None:
        seed, owed, last = 1000, 0.0, time.monotonic()
        while not self.stop.is_set():
            now = time.monotonic()
            owed += self.rate * (now - last)
            last = now
            if (n := int(owed)) > 0:
                send(self.bootstrap, self.topic, demo_records(n, keys=KEYS, seed=seed, hot_key_share=0))
                seed, owed, self.sent = seed + 1, owed - n, self.sent + n
            self.stop.wait(max(0.0, 1.0 - (time.monotonic() - now)))


@dataclass
class Sample:
    t: float  # seconds since the load started
    rate: float
    factor: int
    lag: int


@dataclass
class Step:
    rate: float
    start: float
    end: float
    changes: list[tuple[float, int, int]] = field(default_factory=list)  # (t, from, to)


def triggerer_pid(root: int) -> int | None:
    """The `airflow triggerer` process among the descendants of `airflow standalone` (pid `root`)."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(d.name))
    todo = [root]
    while todo:
        pid = todo.pop()
        try:
            if "triggerer" in (Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()):
                return pid
        except OSError:
            pass
        todo += children.get(pid, [])
    return None


def cpu_s(pid: int) -> float:
    """The process's user + system CPU seconds, from /proc (its threads included)."""
    fields_ = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields_[11]) + int(fields_[12])) / os.sysconf("SC_CLK_TCK")


def oracle_factor(throughput: dict[int, float], rate: float) -> int:
    covering = [f for f, r in sorted(throughput.items()) if r >= rate * HEADROOM]
    return covering[0] if covering else max(throughput, key=lambda f: throughput[f])


def svg(samples: list[Sample], steps: list[Step], oracle: dict[float, int], path: Path) -> None:
    """Three panels drawn by hand: the load, the factor (the oracle's dashed), and the lag, against time."""
    width, height, pad = 760, 200, 52
    xmax = max(s.t for s in samples) or 1

    def panel(y0: int, title: str, series: list[tuple[str, str, list[tuple[float, float]], bool]], unit: str) -> str:
        ymax = max([y for _, _, pts, _ in series for _, y in pts] + [1]) * 1.15

        def at(x: float, y: float) -> str:
            return f"{pad + (width - 2 * pad) * x / xmax:.1f},{y0 + height - pad + 10 - (height - pad - 10) * y / ymax:.1f}"

        out = [f'<text x="{pad}" y="{y0 + 16}" font-size="13">{title}</text>']
        out.append(f'<polyline fill="none" stroke="#999" points="{at(0, ymax)} {at(0, 0)} {at(xmax, 0)}"/>')
        for frac in (0, 0.5, 1):
            v = ymax / 1.15 * frac
            out.append(f'<text x="2" y="{at(0, v).split(",")[1]}" font-size="10">{v:,.0f}{unit}</text>')
            out.append(
                f'<text x="{at(xmax * frac, 0).split(",")[0]}" y="{y0 + height - pad + 24}" font-size="10">{xmax * frac:,.0f} s</text>'
            )
        for s in steps[1:]:
            out.append(
                f'<line x1="{at(s.start, 0).split(",")[0]}" x2="{at(s.start, 0).split(",")[0]}" y1="{y0 + 22}" '
                f'y2="{at(0, 0).split(",")[1]}" stroke="#c92a2a" stroke-dasharray="4 3"/>'
            )
        for i, (name, color, pts, dashed) in enumerate(series):
            dash = ' stroke-dasharray="6 4"' if dashed else ""
            out.append(
                f'<polyline fill="none" stroke="{color}" stroke-width="2"{dash} points="{" ".join(at(x, y) for x, y in pts)}"/>'
            )
            out.append(f'<text x="{width - 250}" y="{y0 + 16 + 14 * i}" font-size="11" fill="{color}">{name}</text>')
        return "\n".join(out)

    def stepped(values: list[tuple[float, float]]) -> list[tuple[float, float]]:
        out: list[tuple[float, float]] = []
        for x, y in values:
            if out:
                out.append((x, out[-1][1]))
            out.append((x, y))
        return out

    oracle_pts = [pt for s in steps for pt in ((s.start, oracle[s.rate]), (s.end, oracle[s.rate]))]
    body = panel(0, "load (records/s fed)", [("load", "#495057", stepped([(s.t, s.rate) for s in samples]), False)], "")
    body += panel(
        height,
        "elasticity factor",
        [
            ("autosizer's factor", "#017cee", stepped([(s.t, s.factor) for s in samples]), False),
            ("oracle's factor (measured, 20 % headroom)", "#2f9e44", oracle_pts, True),
        ],
        "",
    )
    body += panel(2 * height, "records behind (exact)", [("lag", "#e8590c", [(s.t, s.lag) for s in samples], False)], "")
    path.write_text(
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{3 * height}" font-family="sans-serif">\n{body}\n</svg>\n'
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--rates", default="100,800,200", help="records/s of each load step, each `rate:seconds` where not --step-s long"
    )
    p.add_argument("--step-s", type=float, default=240.0, help="seconds of each step")
    p.add_argument("--sample-s", type=float, default=5.0)
    p.add_argument("--oracle-factors", default="1,2,3,4,5,6,8")
    p.add_argument("--oracle-backlog", type=int, default=3000, help="records drained by the oracle per unit of factor")
    p.add_argument(
        "--throughput",
        default="",
        help="the oracle's figures from an earlier run on this machine (e.g. 1:187,2:336): its phase is skipped",
    )
    p.add_argument("--svg", type=Path, default=REPO / "docs" / "results" / "autosize.svg")
    args = p.parse_args()
    plan = [(float(r), float(s) if s else args.step_s) for r, _, s in (x.partition(":") for x in args.rates.split(","))]
    rates = [r for r, _ in plan]
    home = Path(tempfile.mkdtemp(prefix="elasticity-autosize-bench-"))
    broker, spark = EmbeddedBroker(home), SparkConnectServer(home)
    bootstrap = broker.start(port=free_port()).bootstrap
    remote = spark.start(port=free_port(), master="local[2]").remote
    for topic in ("oracle", "auto"):
        create_topic(bootstrap, topic, PARTITIONS)
    (home / "jobs").mkdir()
    (home / "jobs" / "oracle.properties").write_text(job_config(home, "oracle", "oracle"))
    (home / "jobs" / "auto.properties").write_text(
        job_config(home, "auto", "auto", **{"job.elasticity.autosize": "true", **KNOBS})
    )
    store_url = f"sqlite:///{home / 'checkpoints.db'}"
    airflow = AirflowStandalone(
        home / "airflow",
        free_port(),
        {
            **connections(bootstrap, remote, store_url),
            "ELASTICITY_JOBS_DIR": str(home / "jobs"),
            "ELASTICITY_HOME": str(home),
            "KAFKA_BOOTSTRAP_SERVERS": None,
            "ELASTICITY_CHECKPOINT_STORE_URL": None,
        },
    )
    store = CheckpointStore(store_url)
    feeder = Feeder(bootstrap, "auto")
    print(f"state in {home}; Airflow log {airflow.log_file}", flush=True)
    try:
        airflow.start().wait_ready()
        api = airflow.api()
        for job in ("oracle", "auto"):
            api.wait_dag(f"elastic_microbatch__{job}")
            api.unpause(api.wait_dag(f"elastic_data_quality__{job}")["dag_id"], paused=True)  # the batch path alone
        api.wait_dag("elastic_autosize__auto")

        def wait(what, predicate, timeout_s: float = 600):
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                if found := predicate():
                    return found
                time.sleep(2)
            raise RuntimeError(f"no {what} within {timeout_s:.0f} s\n{airflow.tail(40)}")

        os.environ.update({"KAFKA_BOOTSTRAP_SERVERS": bootstrap, "ELASTICITY_CHECKPOINT_STORE_URL": store_url})
        from elasticity.airflow.hooks import connected
        from elasticity.batch.coordinator.lag import lag_report
        from elasticity.config import load_config
        from elasticity.kafka.consumer import HeldKafkaInputs

        readers = {}

        def lag_of(job: str) -> int:
            """The job's exact records behind, as the lag probe reads them (kept-open clients)."""
            if job not in readers:
                config = connected(load_config(home / "jobs" / f"{job}.properties"))
                readers[job] = (config, HeldKafkaInputs(config))
            config, inputs = readers[job]
            return lag_report(config, store, inputs).total

        # 1. the oracle
        throughput = {int(f): float(r) for f, r in (x.split(":") for x in args.throughput.split(",") if x)}
        if throughput:
            print("oracle: from an earlier run: " + ", ".join(f"F={f}: {r:,.0f}" for f, r in throughput.items()), flush=True)
        else:
            wait("first generation of the oracle job", lambda: store.generation("oracle"))
            send(bootstrap, "oracle", demo_records(2000, keys=KEYS, seed=1, hot_key_share=0))  # the session's workers warm up
            wait("warm-up drained", lambda: lag_of("oracle") == 0 and store.lease("oracle") is None)
            throughput = {}
            for factor in (int(f) for f in args.oracle_factors.split(",")):
                if store.generation("oracle").factor != factor:
                    run_id = api.trigger("elastic_rescale", {"job": "oracle", "factor": factor, "dry_run": False})
                    assert api.wait_run("elastic_rescale", run_id, 600)["state"] == "success", airflow.tail(40)
                gen = store.generation("oracle").number
                seen = max((m["batch_id"] for m in store.metrics("oracle", limit=1)), default=0)
                backlog = args.oracle_backlog * factor  # about as many seconds of work at each factor
                send(bootstrap, "oracle", demo_records(backlog, keys=KEYS, seed=10 + factor, hot_key_share=0))
                time.sleep(3)
                wait(f"backlog drained at factor {factor}", lambda: lag_of("oracle") == 0 and store.lease("oracle") is None, 900)
                mine = [
                    m
                    for m in store.metrics("oracle", limit=200)
                    if m["generation"] == gen and m["batch_id"] > seen and m["records_read"]
                ]
                seconds = sum(m["durations_ms"]["total"] for m in mine) / 1000
                throughput[factor] = sum(m["records_read"] for m in mine) / seconds
                print(f"oracle: factor {factor}: {throughput[factor]:,.0f} records/s over {len(mine)} batches", flush=True)
        oracle = {r: oracle_factor(throughput, r) for r in rates}

        # 2. the autosizer in charge
        wait("first generation of the autosized job", lambda: store.generation("auto"))
        pid = triggerer_pid(airflow.proc.pid)
        cpu0, wall0 = (cpu_s(pid) if pid else 0.0), time.monotonic()
        samples: list[Sample] = []
        steps: list[Step] = []
        feeder.start()
        t0 = time.monotonic()
        for rate, seconds in plan:
            feeder.rate = rate
            step = Step(rate, time.monotonic() - t0, 0.0)
            steps.append(step)
            while (now := time.monotonic() - t0) < step.start + seconds:
                g = store.generation("auto")
                try:
                    lag = lag_of("auto")
                except Exception:  # noqa: BLE001 - a reading lost to a busy broker: the next one counts
                    lag = samples[-1].lag if samples else 0
                samples.append(Sample(now, rate, g.factor, lag))
                time.sleep(max(0.0, args.sample_s - (time.monotonic() - t0 - now)))
            step.end = time.monotonic() - t0
        feeder.stop.set()
        triggerer_cpu = (cpu_s(pid) - cpu0) / (time.monotonic() - wall0) if pid else None

        gens = store.generations("auto")
        load_start_ms = int((time.time() - (time.monotonic() - t0)) * 1000)
        for before, after in zip(gens, gens[1:], strict=False):
            t = (after.created_ms - load_start_ms) / 1000
            for s in steps:
                if s.start <= t < s.end:
                    s.changes.append((t, before.factor, after.factor))

        # 4. the controller's own cost, per poll on the live job (as the triggerer's loop calls it)
        from elasticity.airflow.autosize_trigger import AutosizeProbe

        probe = AutosizeProbe(str(home / "jobs" / "auto.properties"))
        try:
            probe.decide(int(time.time() * 1000))
            c0 = time.process_time()
            polls = 20
            for _ in range(polls):
                probe.decide(int(time.time() * 1000))
            per_poll = (time.process_time() - c0) / polls
        finally:
            probe.close()
        poll_s = int(KNOBS["job.elasticity.autosize.poll.ms"]) / 1000

        # 3. per step
        target_s = float(KNOBS["job.elasticity.autosize.target.lag.seconds"])
        print(
            "\noracle (measured throughput per factor, records/s): "
            + ", ".join(f"F={f}: {r:,.0f}" for f, r in throughput.items())
        )
        rows = []
        for i, s in enumerate(steps):
            mine = [x for x in samples if s.start <= x.t < s.end]
            settled = mine[-1].factor if mine else 0
            last_change = s.changes[-1][0] - s.start if s.changes else 0.0
            directions = [1 if b > a else -1 for _, a, b in s.changes]
            reversals = sum(1 for x, y in zip(directions, directions[1:], strict=False) if x != y)
            peak = max(mine, key=lambda x: x.lag) if mine else None
            above = [x for x in mine if x.lag > s.rate * target_s]  # more than target.lag.seconds of input behind
            under = f"{above[-1].t - s.start + args.sample_s:.0f} s" if above else f"never above ({s.rate * target_s:,.0f})"
            chosen = ", ".join(f"{a}->{b} at +{t - s.start:.0f} s" for t, a, b in s.changes) or "none"
            rows.append(
                (
                    f"step {i + 1}: {s.rate:,.0f} records/s",
                    chosen,
                    len(s.changes),
                    f"{last_change:.0f} s",
                    f"{settled} (oracle {oracle[s.rate]})",
                    f"{peak.lag:,} at +{peak.t - s.start:.0f} s" if peak else "-",
                    under,
                    reversals,
                )
            )
        heads = (
            "step",
            "factors chosen (when)",
            "rescales",
            "settled after",
            "settled at",
            "peak lag",
            "lag under target",
            "reversals",
        )
        widths = [max(len(str(r[c])) for r in [heads, *rows]) for c in range(len(heads))]
        for r in [heads, *rows]:
            print(" | ".join(str(v).ljust(w) for v, w in zip(r, widths, strict=True)))
        print(
            f"\ncontroller cost: {per_poll * 1000:.1f} ms CPU per poll, every {poll_s:.0f} s: "
            f"{per_poll / poll_s * 100:.2f} % of a core (target < 1 %)"
        )
        if triggerer_cpu is not None:
            print(
                f"the triggerer process (both jobs' lag watchers, the autosizer, Airflow's own loop) over the load: "
                f"{triggerer_cpu * 100:.1f} % of a core"
            )
        print(f"records fed: {feeder.sent:,}; knobs: {', '.join(f'{k}={v}' for k, v in KNOBS.items())}")
        svg(samples, steps, oracle, args.svg)
        print(f"picture: {args.svg.relative_to(REPO) if args.svg.is_relative_to(REPO) else args.svg}")
    finally:
        feeder.stop.set()
        airflow.stop()
        spark.stop()
        broker.stop()
    return 0


if __name__ == "__main__":
    import logging

    logging.getLogger("kafka").setLevel(logging.WARNING)  # the clients' connection lines would bury the output
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import results

    sys.exit(results.run("autosize_bench", main))
