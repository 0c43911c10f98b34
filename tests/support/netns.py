"""Hosts of the test's own on this machine: a bridge in the test's network namespace with an address the
test assigns (the "network" the master, the driver, the broker and the S3 server listen on), and per host a
network namespace joined to it by a veth pair, with its own address and a default route through the bridge.
Cutting a host's veth link takes it off the network, as a pulled cable would: packets are dropped, nothing
is refused, and TCP carries on once the link is back."""

from __future__ import annotations

import random
import subprocess
import uuid
from dataclasses import dataclass, field

from elasticity.local.cluster import WorkerHost


def _ip(*args: str, netns: str | None = None) -> None:
    command = ["ip", *(["netns", "exec", netns, "ip"] if netns else []), *args]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{' '.join(command)}: {done.stderr.strip()}")


@dataclass
class Network:
    hosts: int
    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:5])
    subnet: int = field(default_factory=lambda: random.randint(1, 250))

    @property
    def bridge(self) -> str:
        return f"elx{self.tag}"

    @property
    def gateway(self) -> str:
        """The test's own address on the network."""
        return f"10.211.{self.subnet}.1"

    def host(self, i: int) -> WorkerHost:
        return WorkerHost(f"elx{self.tag}-{i}", f"10.211.{self.subnet}.{10 + i}")

    def _link(self, i: int) -> str:
        return f"elx{self.tag}h{i}"  # the host side of host i's veth pair

    def up(self) -> Network:
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for i in range(self.hosts):
            ns, peer = self.host(i).netns, f"elx{self.tag}n{i}"
            _ip("netns", "add", ns)
            _ip("link", "add", self._link(i), "type", "veth", "peer", "name", peer)
            _ip("link", "set", peer, "netns", ns)
            _ip("link", "set", self._link(i), "master", self.bridge)
            _ip("link", "set", self._link(i), "up")
            _ip("addr", "add", f"{self.host(i).address}/24", "dev", peer, netns=ns)
            _ip("link", "set", peer, "up", netns=ns)
            _ip("link", "set", "lo", "up", netns=ns)
            _ip("route", "add", "default", "via", self.gateway, netns=ns)
        return self

    def cut(self, i: int) -> None:
        _ip("link", "set", self._link(i), "down")

    def reconnect(self, i: int) -> None:
        _ip("link", "set", self._link(i), "up")

    def down(self) -> None:
        for i in range(self.hosts):
            subprocess.run(["ip", "netns", "delete", self.host(i).netns], capture_output=True)  # its veth pair goes too
            subprocess.run(["ip", "link", "delete", self._link(i)], capture_output=True)
        subprocess.run(["ip", "link", "delete", self.bridge], capture_output=True)
