"""A small TCP relay: connections to `listen:port` are joined byte for byte to `target:port`, for each of a set
of ports. The Celery topology's hosts (network namespaces, `worker_hosts.py`) reach the servers of this machine
that bind loopback only (PostgreSQL, Redis, the embedded broker, the Spark Connect server, the S3 server, the
API server) through two of them: inside each host, its own 127.0.0.1:<port> to the gateway address over the
host's veth link; on this machine, the gateway address to 127.0.0.1:<port>. So every process, on a worker host
or not, uses the same addresses (the broker advertises 127.0.0.1:<port>), and a worker's traffic crosses its
link.

`python -m elasticity.local.tcp_relay LISTEN TARGET PORT [PORT ...]`; it runs until SIGTERM. A target that
refuses (a server restarting) closes the client's connection; the next connection tries again.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import signal
import sys
from collections.abc import Sequence

CHUNK = 64 * 1024


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(ConnectionError, OSError, RuntimeError):
            if writer.can_write_eof():
                writer.write_eof()


async def _join(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter, target: str, port: int) -> None:
    try:
        server_r, server_w = await asyncio.wait_for(asyncio.open_connection(target, port), timeout=10)
    except (TimeoutError, OSError):
        client_w.close()
        return
    try:
        await asyncio.gather(_pipe(client_r, server_w), _pipe(server_r, client_w))
    finally:
        for w in (client_w, server_w):
            with contextlib.suppress(ConnectionError, OSError, RuntimeError):
                w.close()


async def relay(listen: str, target: str, ports: Sequence[int], started: asyncio.Event | None = None) -> None:
    """Serve every port until cancelled."""

    def joiner(port: int):
        async def join(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await _join(reader, writer, target, port)

        return join

    servers = []
    for port in ports:
        try:
            servers.append(await asyncio.start_server(joiner(port), listen, port, reuse_address=True))
        except OSError as e:
            if e.errno != errno.EADDRINUSE or listen == target:
                raise
            # a server listening on every address of this machine answers there itself
            print(f"{listen}:{port} is taken (a server on all addresses?): not relayed", flush=True)
    if started is not None:
        started.set()
    try:
        await asyncio.gather(*(s.serve_forever() for s in servers))
    finally:
        for s in servers:
            s.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m elasticity.local.tcp_relay", description=__doc__.split("\n\n")[0])
    parser.add_argument("listen", help="the address to listen on")
    parser.add_argument("target", help="the address to connect to")
    parser.add_argument("ports", type=int, nargs="+", help="each port, listened on and connected to")
    args = parser.parse_args(argv)

    async def run() -> None:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, task.cancel)
        started = asyncio.Event()
        serving = asyncio.ensure_future(relay(args.listen, args.target, args.ports, started))
        ready = asyncio.ensure_future(started.wait())
        await asyncio.wait([serving, ready], return_when=asyncio.FIRST_COMPLETED)
        if serving.done():  # it could not listen (a port taken): its error, and exit code 1
            ready.cancel()
            serving.result()
        print(f"relaying {args.listen} -> {args.target} on {' '.join(map(str, args.ports))}", flush=True)
        await serving

    with contextlib.suppress(asyncio.CancelledError, KeyboardInterrupt):
        asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
