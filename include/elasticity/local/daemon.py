"""Background services of the embedded default (the Kafka-protocol broker, the
Spark Connect server): one per state folder, started detached so that they
outlive the command that started them, found again through a small state file,
and stopped with SIGTERM. Loopback by default; a service may bind another
address of this machine (the local cluster's tests give workers hosts of their
own in network namespaces)."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from elasticity.config.services import HOST, DaemonState, alive, port_open, read_state, state_file

RELEASE_WAIT_S = 30.0  # how long a restart waits for its dead predecessor's port


class DaemonError(RuntimeError):
    pass


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(host: str = HOST) -> int:
    """A free port below the kernel's ephemeral range. A service restarted on its old address must find it
    free: a port from the ephemeral range can meanwhile be any process's bound or outgoing port, or a
    client retrying it can connect to itself (TCP simultaneous open) and hold it."""
    low = min(_ephemeral_low(), 32768)
    for _ in range(100):
        port = random.randrange(max(1024, low - 12000), low)
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            if not port_open(port, timeout=0.1, host=host):
                return port
    with socket.socket() as s:  # a crowded machine: any free port
        s.bind((host, 0))
        return s.getsockname()[1]


def tail(path: str | Path, lines: int = 20) -> str:
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


class Daemon:
    """A service `name` under `<home>/<name>/`: `<name>.json` (its state), `<name>.log`, `data/`, and
    `port`, the port it last listened on, kept after it stops or dies: started again, it comes back on the
    address its clients know (a connection such as spark_default stays valid)."""

    def __init__(self, name: str, home: Path, default_port: int = 0, host: str = HOST) -> None:
        self.name = name
        self.host = host  # the address it listens on
        self.home = home / name
        self.state_file = state_file(home, name)
        self.log_file = self.home / f"{name}.log"
        self.data_dir = self.home / "data"
        self.port_file = self.home / "port"
        self.default_port = default_port

    def last_port(self) -> int | None:
        """The port it listened on when it last started (running, stopped or dead), if it ever did."""
        try:
            return int(self.port_file.read_text())
        except (OSError, ValueError):
            return None

    def status(self) -> DaemonState | None:
        return read_state(self.state_file)

    def _released(self, port: int, wait_s: float = RELEASE_WAIT_S) -> bool:
        """Whether our own last process, just killed, lets go of its port: a JVM's main thread is a zombie (not
        alive) while its other threads still exit and hold its sockets, longer on a loaded machine."""
        if port != self.last_port():
            return False
        deadline = time.monotonic() + wait_s
        while port_open(port, host=self.host):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)
        return True

    def start(self, command: Sequence[str], port: int, timeout_s: float, env: dict[str, str] | None = None) -> DaemonState:
        """Run `command` (which must listen on host:port) unless this service already runs."""
        running = self.status()
        if running:
            if port != running.port:
                raise DaemonError(f"the {self.name} already runs at {running.address} for {self.home}; stop it first")
            return running
        if port_open(port, host=self.host) and not self._released(port):
            raise DaemonError(f"port {self.host}:{port} is taken by another process; choose one with --port")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_file, "ab") as log:
            proc = subprocess.Popen(
                list(command),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=env,
                cwd=self.home,
                start_new_session=True,  # outlives the CLI that started it
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise DaemonError(
                    f"the {self.name} exited with code {proc.returncode}; see {self.log_file}:\n{tail(self.log_file)}"
                )
            if port_open(port, host=self.host):
                state = DaemonState(
                    pid=proc.pid, port=port, data_dir=str(self.data_dir), log_file=str(self.log_file), host=self.host
                )
                self.state_file.write_text(json.dumps(asdict(state)))
                self.port_file.write_text(str(port))
                return state
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGKILL)
        raise DaemonError(f"the {self.name} did not listen on {self.host}:{port} within {timeout_s:.0f}s; see {self.log_file}")

    def stop(self, timeout_s: float = 15.0) -> bool:
        """Stop the service (its data is kept). False when none was running."""
        try:
            state = DaemonState(**json.loads(self.state_file.read_text()))
        except (OSError, ValueError, TypeError):
            return False
        stopped = False
        if alive(state.pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(state.pid, signal.SIGTERM)  # the whole group: spark-submit's JVM and its Python workers
            deadline = time.monotonic() + timeout_s
            while alive(state.pid) and time.monotonic() < deadline:
                _reap(state.pid)
                time.sleep(0.05)
            if alive(state.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(state.pid, signal.SIGKILL)
            _reap(state.pid)
            stopped = True
        self.state_file.unlink(missing_ok=True)
        return stopped


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
