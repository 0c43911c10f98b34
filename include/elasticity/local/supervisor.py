"""The local cluster's supervisor: what heals a dead daemon without a person.

`elasticity cluster start` runs it beside the cluster's services (a daemon of its
own, `cluster/supervisor/`). Every second it checks each service (master, S3
server, workers, the Connect server, i.e. the driver) and starts what died again,
on the address it had (so spark_default and every client stay valid), as Samza's
ClusterBasedJobCoordinator asks its cluster manager for a failed container again.
A start that fails is retried after a back-off that doubles from 1 s to 60 s.
Restart counts, the last restart and the last failure are written to
`status.json`, which `elasticity cluster status` prints.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from elasticity.config.services import DaemonState
from elasticity.local.cluster import LocalCluster
from elasticity.local.daemon import HOST, Daemon, free_port

CHECK_EVERY_S = 1.0
BACKOFF_MAX_S = 60.0


@dataclass
class ServiceRestarts:
    restarts: int = 0
    last_restart: float | None = None  # epoch seconds
    last_error: str | None = None


@dataclass
class SupervisorStatus:
    services: dict[str, ServiceRestarts] = field(default_factory=dict)
    failed_starts: int = 0  # consecutive starts that failed: the back-off grows with them

    @classmethod
    def read(cls, path: Path) -> SupervisorStatus | None:
        try:
            raw = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return cls({k: ServiceRestarts(**v) for k, v in raw["services"].items()}, raw["failed_starts"])

    def write(self, path: Path) -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self)))
        tmp.replace(path)

    def line(self) -> str:
        parts = []
        for name, s in sorted(self.services.items()):
            when = time.strftime("%H:%M:%S", time.localtime(s.last_restart)) if s.last_restart else None
            parts.append(f"{name} {s.restarts}" + (f" (last {when})" if when else ""))
        failing = f"; {self.failed_starts} failed start(s) in a row" if self.failed_starts else ""
        return "restarts: " + (", ".join(parts) or "none") + failing


def status_file(cluster: LocalCluster) -> Path:
    return cluster.supervisor.home / "status.json"


def supervise(cluster: LocalCluster, workers: int, cores: int, *, memory: str, timeout_s: float = 30) -> None:
    """Start the cluster's supervisor unless it runs (`LocalCluster.stop` stops it first)."""
    if cluster.supervisor.status() is not None:
        return
    port = cluster.supervisor.last_port() or free_port()
    command = [sys.executable, "-m", "elasticity.local.supervisor", "--home", str(cluster.root.parent), "--port", str(port)]
    command += ["--workers", str(workers), "--cores", str(cores), "--memory", memory]
    cluster.supervisor.start(command, port, timeout_s, dict(os.environ))


class Supervisor:
    def __init__(self, cluster: LocalCluster, workers: int, cores: int, memory: str) -> None:
        self.cluster = cluster
        self.workers, self.cores, self.memory = workers, cores, memory
        self.status = SupervisorStatus.read(status_file(cluster)) or SupervisorStatus()
        self.next_try = 0.0

    def services(self) -> dict[str, Daemon]:
        c = self.cluster
        return {
            "master": c.master,
            "s3": c.s3,
            **{f"worker-{i}": c.worker(i) for i in range(self.workers)},
            "spark-connect": c.connect.daemon,
        }

    def states(self) -> dict[str, DaemonState | None]:
        return {name: d.status() for name, d in self.services().items()}

    def check(self) -> list[str]:
        """Start what is down (on its address); returns the services started again: those down before, and those
        that died while the start ran (a SIGKILLed JVM can look alive for a moment yet), whose new process it made."""
        before = self.states()
        down = [name for name, state in before.items() if state is None]
        if not down or time.monotonic() < self.next_try:
            return []
        try:
            # starts only what is not running, master first, each on the port it had
            self.cluster.start(self.workers, self.cores, self.memory)
        except Exception as e:  # noqa: BLE001 - a start that fails is tried again, later
            self.status.failed_starts += 1
            for name in down:
                self.status.services.setdefault(name, ServiceRestarts()).last_error = first_line(e)
            delay = min(BACKOFF_MAX_S, 2 ** (self.status.failed_starts - 1))
            self.next_try = time.monotonic() + delay
            self.status.write(status_file(self.cluster))
            print(
                f"{time.strftime('%H:%M:%S')} starting {', '.join(down)} failed, again in {delay:.0f} s: {first_line(e)}",
                flush=True,
            )
            return []
        self.status.failed_starts = 0
        after = self.states()
        started = [
            name for name, was in before.items() if (now := after.get(name)) is not None and (was is None or now.pid != was.pid)
        ]
        for name in started:
            s = self.status.services.setdefault(name, ServiceRestarts())
            s.restarts += 1
            s.last_restart = time.time()
        self.status.write(status_file(self.cluster))
        return started

    def run(self) -> None:
        self.status.write(status_file(self.cluster))
        while True:
            try:
                for name in self.check():
                    print(f"{time.strftime('%H:%M:%S')} started {name} again", flush=True)
            except Exception as e:  # noqa: BLE001 - whatever goes wrong in a round, the next one heals
                print(f"{time.strftime('%H:%M:%S')} check failed: {first_line(e)}", flush=True)
            _reap_children()
            time.sleep(CHECK_EVERY_S)


def first_line(e: BaseException) -> str:
    """An error in one line, also one without a message (an AssertionError, say)."""
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:300]


def _reap_children() -> None:
    """The services it started are its children: collect those that died (a zombie is not alive)."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


def _listen(port: int) -> None:
    """A port of its own: how the daemon machinery tells that it runs."""
    server = socket.create_server((HOST, port))

    def accept() -> None:
        while True:
            server.accept()[0].close()

    threading.Thread(target=accept, daemon=True).start()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--home", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--workers", type=int, required=True)
    p.add_argument("--cores", type=int, required=True)
    p.add_argument("--memory", required=True)
    args = p.parse_args()
    _listen(args.port)
    Supervisor(LocalCluster(Path(args.home)), args.workers, args.cores, args.memory).run()


if __name__ == "__main__":
    main()
