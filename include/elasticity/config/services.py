"""Where the embedded default's services listen, as a job finds them when its config names no address.

The local stack (`elasticity.local`) starts the broker and the Spark Connect server detached and writes
each one's state file, `<home>/<name>/<name>.json`; this module only reads it, so production code finds
the embedded services without importing the stack that runs them."""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from elasticity.config.home import elasticity_home

HOST = "127.0.0.1"
BROKER = "broker"
CONNECT_SERVER = "spark-connect"


@dataclass(frozen=True, kw_only=True)
class DaemonState:
    pid: int
    port: int
    data_dir: str
    log_file: str
    host: str = HOST

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def port_open(port: int, timeout: float = 0.5, host: str = HOST) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie child of ours is not alive
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return True


def state_file(home: Path, name: str) -> Path:
    return home / name / f"{name}.json"


def read_state(path: Path) -> DaemonState | None:
    """The service of this state file if its process lives and listens, else None."""
    try:
        state = DaemonState(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None
    return state if alive(state.pid) and port_open(state.port, host=state.host) else None


def running_service(name: str, home: Path | None = None) -> DaemonState | None:
    return read_state(state_file(home or elasticity_home(), name))
