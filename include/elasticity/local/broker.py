"""The embedded Kafka-protocol broker: a real broker process (noida-db) on 127.0.0.1.

Its data, log and state file live under the project state folder
(`$ELASTICITY_HOME`, default `./.elasticity`), so `start`, `status` and `stop`
work across shell sessions and the data survives a restart.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from elasticity.config import elasticity_home
from elasticity.config.services import BROKER
from elasticity.local.daemon import HOST, Daemon, DaemonError, DaemonState, free_port

DEFAULT_PORT = 9092
__all__ = ["DEFAULT_PORT", "HOST", "BrokerError", "BrokerState", "EmbeddedBroker", "free_port"]

BrokerError = DaemonError


@dataclass(frozen=True)
class BrokerState(DaemonState):
    @property
    def bootstrap(self) -> str:
        return self.address


def _binary() -> Path:
    path = Path(str(files("noida_db").joinpath("noida-db")))
    if not path.is_file():
        raise BrokerError(f"noida-db binary not found at {path}; is noida-db installed (requirements.txt)?")
    if not os.access(path, os.X_OK):
        path.chmod(0o755)
    return path


class EmbeddedBroker:
    """One broker per state folder (default `$ELASTICITY_HOME`)."""

    def __init__(self, home: Path | None = None, host: str = HOST) -> None:
        self.daemon = Daemon(BROKER, home or elasticity_home(), host=host)

    def status(self) -> BrokerState | None:
        state = self.daemon.status()
        return BrokerState(**vars(state)) if state else None

    def start(self, port: int | None = None, timeout_s: float = 20.0) -> BrokerState:
        running = self.status()
        if running and port is None:
            return running
        port = port or self.daemon.last_port() or DEFAULT_PORT
        command = [
            str(_binary()),
            "start",
            "--only",
            "kafka",
            "--kafka-port",
            str(port),
            "--data-dir",
            str(self.daemon.data_dir),
            "--host",
            self.daemon.host,
        ]
        return BrokerState(**vars(self.daemon.start(command, port, timeout_s)))

    def stop(self, timeout_s: float = 10.0) -> bool:
        """Stop the broker (data is kept). False when none was running."""
        return self.daemon.stop(timeout_s)
