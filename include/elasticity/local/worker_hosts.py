"""Hosts of their own for the Celery topology's workers, on this machine: per worker a network namespace
`elx-<tag>-w<N>` joined to this machine by a veth pair, its address 10.250.N.2 (this machine's side
10.250.N.1), a default route through that link, and its own loopback. The servers every worker shares
(PostgreSQL, Redis, the embedded broker, the Spark Connect server, the S3 server, Airflow's API server) bind
127.0.0.1 here; the gateway address 10.250.0.1 (added to this machine's `lo`) and two TCP relays
(`tcp_relay.py`) make them reachable from a worker at the very addresses the rest of the topology uses:
inside the host, 127.0.0.1:<port> -> 10.250.0.1:<port> over the link; here, 10.250.0.1:<port> -> 127.0.0.1:<port>.
A worker's log server listens on its own address, where the API server fetches task logs from.

Needs root and `ip` (iproute2). Every name carries the topology's tag, and `down()` removes what `up()`
made, also after a partial `up()`.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

GATEWAY = "10.250.0.1"  # this machine's address as the worker hosts see it, on `lo`
RELAY = "elasticity.local.tcp_relay"


class WorkerHostError(RuntimeError):
    pass


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if done.returncode:
        raise WorkerHostError(f"ip {' '.join(args)}: {done.stderr.strip()} (the worker hosts need root and iproute2)")


@dataclass(frozen=True)
class Host:
    """Worker N's host: its namespace, its address, and the two ends of its link."""

    index: int
    tag: str

    @property
    def netns(self) -> str:
        return f"elx-{self.tag}-w{self.index}"

    @property
    def address(self) -> str:
        return f"10.250.{self.index}.2"

    @property
    def link_address(self) -> str:
        return f"10.250.{self.index}.1"

    @property
    def link(self) -> str:
        """This machine's end of the veth pair (at most 15 characters, as Linux allows)."""
        return f"elx{self.tag}h{self.index}"

    @property
    def peer(self) -> str:
        return f"elx{self.tag}n{self.index}"

    def command(self, argv: Sequence[str]) -> list[str]:
        """`argv` run on this host."""
        return ["ip", "netns", "exec", self.netns, *argv]


def _relay_command(listen: str, target: str, ports: Sequence[int]) -> list[str]:
    return [sys.executable, "-m", RELAY, listen, target, *map(str, ports)]


class WorkerHosts:
    def __init__(self, count: int, folder: Path, tag: str | None = None) -> None:
        """`count` hosts, tagged `tag` (default: 5 random hex digits); `folder`: the relays' logs."""
        if not 1 <= count <= 200:
            raise ValueError(f"worker hosts: {count}; between 1 and 200")
        self.count, self.folder = count, folder
        self.tag = tag or secrets.token_hex(3)[:5]
        self._gateway_added = False
        self._relays: list[subprocess.Popen] = []

    def host(self, i: int) -> Host:
        return Host(i, self.tag)

    @property
    def hosts(self) -> list[Host]:
        return [self.host(i) for i in range(1, self.count + 1)]

    def up(self, ports: Sequence[int]) -> WorkerHosts:
        """The namespaces, their links and routes, and the relays of `ports` (the shared servers')."""
        try:
            self._add_gateway()
            for h in self.hosts:
                _ip("netns", "add", h.netns)
                _ip("link", "add", h.link, "type", "veth", "peer", "name", h.peer)
                _ip("link", "set", h.peer, "netns", h.netns)
                _ip("addr", "add", f"{h.link_address}/24", "dev", h.link)
                _ip("link", "set", h.link, "up")
                _ip("-n", h.netns, "addr", "add", f"{h.address}/24", "dev", h.peer)
                _ip("-n", h.netns, "link", "set", h.peer, "up")
                _ip("-n", h.netns, "link", "set", "lo", "up")
                _ip("-n", h.netns, "route", "add", "default", "via", h.link_address)
            self.folder.mkdir(parents=True, exist_ok=True)
            self._start_relay("relay-gateway", _relay_command(GATEWAY, "127.0.0.1", ports))
            for h in self.hosts:
                self._start_relay(f"relay-w{h.index}", h.command(_relay_command("127.0.0.1", GATEWAY, ports)))
        except BaseException:
            self.down()
            raise
        return self

    def _add_gateway(self) -> None:
        shown = subprocess.run(["ip", "-4", "addr", "show", "dev", "lo"], capture_output=True, text=True).stdout
        if f" {GATEWAY}/" not in shown:
            _ip("addr", "add", f"{GATEWAY}/32", "dev", "lo")
            self._gateway_added = True

    def _start_relay(self, name: str, command: list[str], timeout_s: float = 30) -> None:
        log = self.folder / f"{name}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
            )
        self._relays.append(proc)
        deadline = time.monotonic() + timeout_s
        while b"relaying" not in log.read_bytes():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise WorkerHostError(f"the relay {name} did not start: {log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.05)

    def down(self) -> None:
        """Everything `up` made (what is already gone is skipped)."""
        for proc in self._relays:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self._relays.clear()
        for h in self.hosts:
            subprocess.run(["ip", "netns", "delete", h.netns], capture_output=True)  # its end of the link goes too
            subprocess.run(["ip", "link", "delete", h.link], capture_output=True)
        if self._gateway_added:
            subprocess.run(["ip", "addr", "del", f"{GATEWAY}/32", "dev", "lo"], capture_output=True)
            self._gateway_added = False

    def leftovers(self) -> list[str]:
        """The namespaces and links of this tag that still exist (none after `down`)."""
        names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
        links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
        return [n for n in names if n.startswith(f"elx-{self.tag}-")] + [
            h.link for h in self.hosts if f" {h.link}@" in links or f" {h.link}:" in links
        ]
