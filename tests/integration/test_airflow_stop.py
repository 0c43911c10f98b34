"""`elasticity airflow` and `make airflow` stop Airflow and every process they started on SIGTERM, as on
Ctrl-C: systemd and `docker stop` send TERM, `airflow standalone` runs in a session of its own, which a
TERM to the CLI alone never reaches, and make dies of a TERM without passing it on to its recipe."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from elasticity.local.connect_server import SparkConnectServer
from elasticity.local.daemon import free_port, port_open
from tests.conftest import REPO


def _session_of(pid: int) -> int | None:
    """The session of a live process (None: gone, or a zombie that has exited)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return None if fields[0] == "Z" else int(fields[3])
    except (OSError, IndexError, ValueError):
        return None


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    return found


def _in_session(sid: int) -> list[int]:
    return [int(p.parent.name) for p in Path("/proc").glob("[0-9]*/stat") if _session_of(int(p.parent.name)) == sid]


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        children = _children(todo.pop())
        found += children
        todo += children
    return found


@pytest.mark.parametrize("how", ["elasticity airflow", "make airflow"])
def test_sigterm_stops_airflow_and_what_it_started(tmp_path, kafka_bootstrap, spark_connect, how):
    port = free_port()
    env = {**os.environ, "ELASTICITY_HOME": str(tmp_path / "home"), "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap}
    env.pop("AIRFLOW_HOME", None)
    command = (
        [sys.executable, "-m", "elasticity", "airflow", "--port", str(port), "--spark-remote", spark_connect]
        if how == "elasticity airflow"
        else ["make", "--no-print-directory", "airflow", f"PORT={port}"]  # its embedded Connect server, which stays
    )
    proc = subprocess.Popen(
        command,
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    airflow = None
    try:
        assert proc.stdout is not None
        seen = []
        for line in proc.stdout:  # until the UI answers (the CLI prints its address then)
            seen.append(line)
            if line.startswith("Airflow UI:"):
                break
        assert port_open(port), "".join(seen)
        (airflow,) = [  # `airflow standalone`, a session leader (the embedded Connect server is another)
            c for c in _descendants(proc.pid) if _session_of(c) == c and b"standalone" in _cmdline(c)
        ]
        assert len(_in_session(airflow)) > 1  # its api-server, scheduler, dag-processor, triggerer
        if how == "make airflow":  # the embedded Connect server it started warms up while Airflow starts
            warm_up = SparkConnectServer(tmp_path / "home").warm_up_status()
            assert warm_up is not None and warm_up.state in ("warming", "warm"), warm_up
        cli = int(Path(f"/proc/{airflow}/stat").read_text().rsplit(")", 1)[1].split()[1])  # its parent: the CLI
        proc.send_signal(signal.SIGTERM)  # to the CLI, or to make alone
        code = proc.wait(timeout=120)
        if how == "elasticity airflow":
            assert code == 0
        deadline = time.monotonic() + 120
        while (_in_session(airflow) or _session_of(cli) is not None) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _session_of(cli) is None, f"{how} outlived its SIGTERM"
        assert _in_session(airflow) == [], f"processes of airflow standalone outlived {how}'s SIGTERM"
        assert not port_open(port)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in _in_session(airflow) if airflow else []:  # what a failed test would leave behind
            os.kill(pid, signal.SIGKILL)
        SparkConnectServer(tmp_path / "home").stop()
