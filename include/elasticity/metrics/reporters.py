"""Where SEP-32's metrics go besides the store table: StatsD, the way Airflow
deployments already collect Airflow's own metrics.

The job config uses Samza's reporter keys (`metrics.reporters=statsd`,
`metrics.reporter.statsd.host|port|prefix`). Without `metrics.reporters`,
Airflow's `[metrics]` section decides (`statsd_on`, `statsd_host`,
`statsd_port`, `statsd_prefix`), read from the `AIRFLOW__METRICS__*`
environment: Airflow's own override of its config, which the Airflow hook also
exports from airflow.cfg for the processes it runs (this core never imports
Airflow). A reporter never fails a batch or a rescale: a send error is logged.
"""

from __future__ import annotations

import logging
import os
import re
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from elasticity.config import JobConfig
from elasticity.config.parsers import int_range
from elasticity.config.runtime_rules import deployment_setting

log = logging.getLogger(__name__)

AIRFLOW_METRICS_ENV = "AIRFLOW__METRICS__"
MAX_DATAGRAM = 1432  # bytes: one Ethernet MTU without headers, as StatsD clients batch


@dataclass(frozen=True)
class Metric:
    """One StatsD sample: `name` below the prefix (dotted), `kind` g (gauge) or c (counter)."""

    name: str
    value: int | float
    kind: str = "g"

    def line(self, prefix: str) -> str:
        return f"{prefix}.{self.name}:{self.value}|{self.kind}"


def metric_name(*parts: str) -> str:
    """Dotted name whose parts keep only StatsD-safe characters (a task name like
    `Partition 3` or `SystemStreamPartition [kafka, orders, 3]` becomes one part)."""
    return ".".join(re.sub(r"[^A-Za-z0-9_-]+", "_", p).strip("_") or "_" for p in parts)


@dataclass(frozen=True)
class StatsdTarget:
    reporter: str  # the name in metrics.reporters ("airflow" when Airflow's [metrics] section decided)
    host: str
    port: int
    prefix: str


def _airflow(env: Mapping[str, str], option: str) -> str | None:
    value = env.get(AIRFLOW_METRICS_ENV + option.upper())
    return value.strip() if value and value.strip() else None


def statsd_targets(config: JobConfig, env: Mapping[str, str] | None = None) -> tuple[StatsdTarget, ...]:
    """The StatsD reporters the job config names, with Airflow's [metrics] values as defaults;
    without `metrics.reporters`, Airflow's statsd_on alone."""
    env = os.environ if env is None else env
    raw = config.raw_map
    host = _airflow(env, "statsd_host") or "localhost"
    port = deployment_setting(
        f"{AIRFLOW_METRICS_ENV}STATSD_PORT",
        _airflow(env, "statsd_port") or "8125",
        int_range(1, 65535),
        meaning="Airflow's [metrics] statsd_port",
    )
    airflow_prefix = _airflow(env, "statsd_prefix")
    prefix = f"{airflow_prefix}.elasticity" if airflow_prefix else "elasticity"
    if "metrics.reporters" not in raw:
        if (_airflow(env, "statsd_on") or "false").lower() in ("true", "1", "t", "yes"):
            return (StatsdTarget("airflow", host, port, prefix),)
        return ()
    targets = []
    for name in (n.strip() for n in raw["metrics.reporters"].split(",") if n.strip()):
        key = f"metrics.reporter.{name}."
        if config.value(key + "class") not in (None, "statsd"):
            continue  # one of Samza's JVM reporters: accepted, not run (the config load warned)
        targets.append(
            StatsdTarget(name, raw.get(key + "host", host), int(raw.get(key + "port", port)), raw.get(key + "prefix", prefix))
        )
    return tuple(targets)


class StatsdReporter:
    """StatsD's line protocol over UDP (`<prefix>.<name>:<value>|<g|c>`), lines packed
    into datagrams of at most MAX_DATAGRAM bytes, newline-separated."""

    def __init__(self, target: StatsdTarget) -> None:
        self.target = target
        self._sock: socket.socket | None = None

    def send(self, metrics: Iterable[Metric]) -> None:
        if self._sock is None:
            family = socket.getaddrinfo(self.target.host, self.target.port, type=socket.SOCK_DGRAM)[0][0]
            self._sock = socket.socket(family, socket.SOCK_DGRAM)
        for datagram in _datagrams(m.line(self.target.prefix) for m in metrics):
            self._sock.sendto(datagram, (self.target.host, self.target.port))

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def _datagrams(lines: Iterable[str]) -> Iterable[bytes]:
    packet = b""
    for line in lines:
        data = line.encode()
        if packet and len(packet) + 1 + len(data) > MAX_DATAGRAM:
            yield packet
            packet = b""
        packet = packet + b"\n" + data if packet else data
    if packet:
        yield packet


class Reporters:
    """Every reporter of a job; `report` never raises (metrics must not fail the work they measure)."""

    def __init__(self, reporters: Iterable[StatsdReporter] = ()) -> None:
        self.reporters = tuple(reporters)

    @classmethod
    def of(cls, config: JobConfig, env: Mapping[str, str] | None = None) -> Reporters:
        return cls(StatsdReporter(t) for t in statsd_targets(config, env))

    def report(self, metrics: Iterable[Metric]) -> None:
        metrics = list(metrics)
        for r in self.reporters:
            try:
                r.send(metrics)
            except OSError as e:
                log.warning("metrics reporter %r (%s:%s): %s", r.target.reporter, r.target.host, r.target.port, e)

    def close(self) -> None:
        for r in self.reporters:
            r.close()
