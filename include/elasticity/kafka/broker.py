"""The embedded Kafka-protocol broker: a real broker process (noida-db) on 127.0.0.1.

Its data and a small state file live under the project state folder
(`$ELASTICITY_HOME`, default `./.elasticity`), so `start`, `status` and `stop`
work across shell sessions and the data survives a restart.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass
from importlib.resources import files
from pathlib import Path

DEFAULT_PORT = 9092
HOST = "127.0.0.1"


class BrokerError(RuntimeError):
    pass


def state_home() -> Path:
    return Path(os.environ.get("ELASTICITY_HOME", ".elasticity")).resolve()


@dataclass(frozen=True)
class BrokerState:
    pid: int
    port: int
    data_dir: str
    log_file: str

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"


def _binary() -> Path:
    path = Path(str(files("noida_db").joinpath("noida-db")))
    if not path.is_file():
        raise BrokerError(f"noida-db binary not found at {path}; is noida-db installed (requirements.txt)?")
    if not os.access(path, os.X_OK):
        path.chmod(0o755)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _port_open(port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=timeout):
            return True
    except OSError:
        return False


def _alive(pid: int) -> bool:
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


class EmbeddedBroker:
    """One broker per state folder."""

    def __init__(self, home: Path | None = None) -> None:
        self.home = (home or state_home()) / "broker"
        self.state_file = self.home / "broker.json"

    def status(self) -> BrokerState | None:
        try:
            state = BrokerState(**json.loads(self.state_file.read_text()))
        except (OSError, ValueError, TypeError):
            return None
        return state if _alive(state.pid) and _port_open(state.port) else None

    def start(self, port: int | None = None, timeout_s: float = 20.0) -> BrokerState:
        running = self.status()
        if running:
            if port not in (None, running.port):
                raise BrokerError(f"a broker already runs at {running.bootstrap} for {self.home}; stop it first")
            return running
        port = port or DEFAULT_PORT
        if _port_open(port):
            raise BrokerError(f"port {HOST}:{port} is taken by another process; choose one with --port")
        data_dir = self.home / "data"
        data_dir.mkdir(parents=True, exist_ok=True)
        log_file = self.home / "broker.log"
        with open(log_file, "ab") as log:
            proc = subprocess.Popen(
                [str(_binary()), "start", "--only", "kafka", "--kafka-port", str(port), "--data-dir", str(data_dir), "--host", HOST],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,  # outlives the CLI that started it
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise BrokerError(f"broker exited with code {proc.returncode}; see {log_file}:\n{_tail(log_file)}")
            if _port_open(port):
                state = BrokerState(proc.pid, port, str(data_dir), str(log_file))
                self.state_file.write_text(json.dumps(asdict(state)))
                return state
            time.sleep(0.05)
        proc.kill()
        raise BrokerError(f"broker did not listen on {HOST}:{port} within {timeout_s:.0f}s; see {log_file}")

    def stop(self, timeout_s: float = 10.0) -> bool:
        """Stop the broker (data is kept). False when none was running."""
        try:
            state = BrokerState(**json.loads(self.state_file.read_text()))
        except (OSError, ValueError, TypeError):
            return False
        stopped = False
        if _alive(state.pid):
            os.kill(state.pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout_s
            while _alive(state.pid) and time.monotonic() < deadline:
                _reap(state.pid)
                time.sleep(0.05)
            if _alive(state.pid):
                os.kill(state.pid, signal.SIGKILL)
            _reap(state.pid)
            stopped = True
        self.state_file.unlink(missing_ok=True)
        return stopped


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
