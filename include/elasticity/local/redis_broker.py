"""Redis as Celery's broker for the Celery topology (`elasticity airflow --executor celery`).

Machines of this project's kind run a Redis on 127.0.0.1:6379 before anyone logs in, and `make` installs
Debian's `redis-server` where none runs; `answers` tells whether a Redis answers at a URL (a PING, no client
library). The topology can also run one of its own, a daemon under `<home>/redis/` on a port of its own,
on loopback, keeping nothing on disk (Airflow's scheduler queues again what a restarted broker lost), the
way the embedded broker runs.
"""

from __future__ import annotations

import shutil
import socket
from pathlib import Path
from urllib.parse import urlsplit

from elasticity.local.daemon import HOST, Daemon, DaemonError, free_port

MACHINE_REDIS = "redis://127.0.0.1:6379/0"


def answers(url: str, timeout_s: float = 2.0) -> bool:
    """Whether a Redis server answers PING at `url` (redis://host:port/db, no password)."""
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or HOST, parts.port or 6379), timeout=timeout_s) as s:
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


def redis_server() -> str:
    found = shutil.which("redis-server")
    if not found:
        raise DaemonError("no redis-server on PATH: `apt-get install redis-server` (make airflow CELERY=1 installs it)")
    return found


class RedisBroker:
    """A Redis of the topology's own, one per state folder."""

    def __init__(self, home: Path, host: str = HOST) -> None:
        self.daemon = Daemon("redis", home, host=host)

    def url(self, port: int) -> str:
        return f"redis://{self.daemon.host}:{port}/0"

    def start(self, port: int | None = None, timeout_s: float = 30) -> str:
        """Start it (on its last port when it ran before, else `port` or a free one); its URL."""
        running = self.daemon.status()
        if running:
            return self.url(running.port)
        port = port or self.daemon.last_port() or free_port(self.daemon.host)
        self.daemon.data_dir.mkdir(parents=True, exist_ok=True)
        command = [
            redis_server(),
            "--port",
            str(port),
            "--bind",
            self.daemon.host,
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.daemon.data_dir),
            "--daemonize",
            "no",
        ]
        self.daemon.start(command, port, timeout_s)
        return self.url(port)

    def stop(self) -> bool:
        return self.daemon.stop()

    def restart(self, timeout_s: float = 30) -> str:
        """Stopped and started again on its port, empty (as a broker restarted without persistence is)."""
        port = self.daemon.last_port()
        self.stop()
        return self.start(port, timeout_s)
