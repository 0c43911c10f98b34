"""A StatsD collector for tests: a real UDP socket on loopback that keeps every line it receives."""

from __future__ import annotations

import socket
from collections.abc import Callable


class StatsdListener:
    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.lines: list[str] = []
        self.datagrams: list[bytes] = []

    def until(self, done: Callable[[list[str]], bool], timeout_s: float = 30.0) -> list[str]:
        """Receive until `done(lines)` holds; the timeout only bounds a failing test."""
        self.sock.settimeout(timeout_s)
        while not done(self.lines):
            data = self.sock.recv(65535)
            self.datagrams.append(data)
            self.lines += data.decode().split("\n")
        return self.lines

    def values(self, suffix: str) -> list[str]:
        """`value|type` of every line whose name ends with `suffix`."""
        return [line.split(":", 1)[1] for line in self.lines if line.split(":", 1)[0].endswith(suffix)]

    def close(self) -> None:
        self.sock.close()
