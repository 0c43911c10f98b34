"""`elasticity airflow` (what `make airflow` runs) stops Airflow and every process it started on SIGTERM, as on
Ctrl-C: systemd and `docker stop` send TERM, and `airflow standalone` runs in a session of its own, which a
TERM to the CLI alone never reaches."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from elasticity.daemon import free_port, port_open
from tests.conftest import REPO


def _session_of(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[3])
    except (OSError, IndexError, ValueError):
        return None


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


def test_sigterm_stops_airflow_and_what_it_started(tmp_path, kafka_bootstrap, spark_connect):
    port = free_port()
    env = {**os.environ, "ELASTICITY_HOME": str(tmp_path / "home"), "KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap}
    env.pop("AIRFLOW_HOME", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "elasticity.cli", "airflow", "--port", str(port), "--spark-remote", spark_connect],
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
        (airflow,) = [c for c in _children(proc.pid) if _session_of(c) == c]  # `airflow standalone`, a session leader
        assert len(_in_session(airflow)) > 1  # its api-server, scheduler, dag-processor, triggerer
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 0
        deadline = time.monotonic() + 30
        while _in_session(airflow) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _in_session(airflow) == [], "processes of airflow standalone outlived the CLI's SIGTERM"
        assert not port_open(port)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in _in_session(airflow) if airflow else []:  # what a failed test would leave behind
            os.kill(pid, signal.SIGKILL)
