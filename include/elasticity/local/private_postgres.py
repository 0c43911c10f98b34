"""A PostgreSQL server of the caller's own (initdb and pg_ctl from the system's binaries, trust auth on
127.0.0.1, a port of its own), for what must stop and restart a store's server without touching the machine's
shared one: the soak's faults and the store-outage tests."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path


class PrivatePostgres:
    """The server in `folder` (its data folder made at the first start) on `port`."""

    def __init__(self, folder: Path, port: int) -> None:
        found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
        if not found:
            raise FileNotFoundError("no PostgreSQL binaries under /usr/lib/postgresql (Debian's postgresql package)")
        self.bin = found[-1].parent
        self.folder, self.port = folder, port
        self.data = folder / "data"
        self.as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []  # initdb refuses root

    def _run(self, *args: str) -> None:
        subprocess.run([*self.as_postgres, *args], check=True, capture_output=True, text=True, timeout=120)

    def start(self) -> PrivatePostgres:
        if not self.data.exists():
            self.folder.mkdir(parents=True, exist_ok=True)
            if self.as_postgres:
                shutil.chown(self.folder, "postgres", "postgres")
            self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        self._run(
            str(self.bin / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.folder / "postgres.log"),
            "-w",
            "-o",
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.folder}",
            "start",
        )
        return self

    def stop(self) -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"
