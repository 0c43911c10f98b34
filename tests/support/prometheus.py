"""A real Prometheus server (Debian's `prometheus` package) on loopback, scraping one target every second, and
PromQL through its HTTP API."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import requests

from elasticity.local.broker import free_port

BINARY = shutil.which("prometheus") or "/usr/bin/prometheus"


class PrometheusServer:
    def __init__(self, folder: Path, target: str, metrics_path: str, *, bearer_token: str | None = None) -> None:
        self.folder = folder
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        auth = f"    authorization:\n      credentials: {bearer_token}\n" if bearer_token else ""
        (folder / "prometheus.yml").write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
            "scrape_configs:\n"
            "  - job_name: elasticity\n"
            "    honor_labels: true\n"
            f"    metrics_path: {metrics_path}\n"
            f"{auth}"
            f"    static_configs:\n      - targets: ['{target}']\n"
        )
        self.log = folder / "prometheus.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> PrometheusServer:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [
                    BINARY,
                    f"--config.file={self.folder / 'prometheus.yml'}",
                    f"--storage.tsdb.path={self.folder / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"prometheus exited ({self.proc.returncode}): {self.log.read_text()[-3000:]}"
            try:
                if requests.get(f"{self.base}/-/ready", timeout=2).status_code == 200:
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.2)
        raise TimeoutError(f"prometheus not ready in 60 s: {self.log.read_text()[-3000:]}")

    def query(self, promql: str) -> list[dict]:
        """An instant query's result vector ([{"metric": {...}, "value": [t, "v"]}, ...])."""
        r = requests.get(f"{self.base}/api/v1/query", params={"query": promql}, timeout=10)
        r.raise_for_status()
        body = r.json()
        assert body["status"] == "success", body
        return body["data"]["result"]

    def until(self, promql: str, timeout_s: float = 60) -> list[dict]:
        """The query's result once it is not empty (the first scrapes land a second or two after the start)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if found := self.query(promql):
                return found
            time.sleep(0.5)
        raise TimeoutError(f"{promql!r}: no result in {timeout_s} s; targets: {self.targets()}")

    def targets(self) -> list[dict]:
        return requests.get(f"{self.base}/api/v1/targets", timeout=10).json()["data"]["activeTargets"]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
