"""Unit tests need no broker, Spark, Airflow database or network, and a state move's scans run
on the test's own thread (tests/integration has the real services and worker processes)."""

from __future__ import annotations

import socket

import pytest

from elasticity.state import rescale
from elasticity.state.bucketscan import ScanJob, ScanResult, answer


class InProcessScanWorkers:
    """`ScanWorkers` on the caller's thread: the same JSON lines and `answer` a worker process runs,
    without starting one per core for every state move."""

    def __init__(self, count: int) -> None:
        self.count = count

    def run(self, job: ScanJob) -> ScanResult:
        return ScanResult.from_json(answer(job.to_json()))

    def close(self) -> None:
        pass


@pytest.fixture(autouse=True)
def _scan_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rescale, "ScanWorkers", InProcessScanWorkers)


@pytest.fixture(autouse=True)
def _no_tcp(monkeypatch: pytest.MonkeyPatch) -> None:
    """A unit test that opens a TCP connection (a broker, a database server, a web page) fails at once,
    instead of passing only where that service happens to run. UDP on loopback (StatsD) is fine."""

    def refuse(original):
        def connect(sock: socket.socket, address, *args):
            if sock.type == socket.SOCK_STREAM and sock.family in (socket.AF_INET, socket.AF_INET6):
                raise RuntimeError(
                    f"a unit test connected to {address}: tests that talk to a service belong in tests/integration"
                )
            return original(sock, address, *args)

        return connect

    monkeypatch.setattr(socket.socket, "connect", refuse(socket.socket.connect))
    monkeypatch.setattr(socket.socket, "connect_ex", refuse(socket.socket.connect_ex))
