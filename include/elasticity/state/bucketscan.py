"""The bucket scan of a state move: each entry of one old snapshot into the SST
file of its key's new bucket.

It is a move's only per-entry work (~0.5 us an entry in Python, against
~0.25 us an entry to download and open a snapshot), so `move_state` runs it in
worker processes, one per core, while its threads download and upload. A
worker is this file run as a script: it imports neither the package's
managers nor boto3 and starts in ~50 ms. Protocol: one `ScanJob` as a JSON line
on stdin, one `ScanResult` as a JSON line on stdout.
"""

from __future__ import annotations

import contextlib
import json
import queue
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

if __package__ in (None, ""):  # run as a worker script: the package root is two folders up
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import xxhash
from rocksdict import AccessType, Options, Rdict, SstFileWriter

from elasticity.jobmodel.keybucket import SEED

_2_63, _2_64 = 1 << 63, 1 << 64


@dataclass(frozen=True, kw_only=True)
class ScanJob:
    folder: str  # an old snapshot: a RocksDB checkpoint, opened read-only
    factor: int  # the new factor G
    outputs: Mapping[int, str | None]  # new bucket -> its SST file (None: count only, for the dry run)
    store: str
    source: str  # the old task's name, for the error

    def to_json(self) -> str:
        return json.dumps(
            {
                "folder": self.folder,
                "factor": self.factor,
                "outputs": {str(b): p for b, p in self.outputs.items()},
                "store": self.store,
                "source": self.source,
            }
        )

    @classmethod
    def from_json(cls, line: str) -> ScanJob:
        j = json.loads(line)
        return cls(
            folder=j["folder"],
            factor=j["factor"],
            outputs={int(b): p for b, p in j["outputs"].items()},
            store=j["store"],
            source=j["source"],
        )


@dataclass(frozen=True)
class ScanResult:
    keys: Mapping[int, int] = field(default_factory=dict)  # per new bucket that received entries
    bytes: Mapping[int, int] = field(default_factory=dict)  # serialised keys and values
    error: str | None = None  # a key that is not a share of the source: nothing may be moved

    def to_json(self) -> str:
        return json.dumps(
            {
                "keys": {str(b): n for b, n in self.keys.items()},
                "bytes": {str(b): n for b, n in self.bytes.items()},
                "error": self.error,
            }
        )

    @classmethod
    def from_json(cls, line: str) -> ScanResult:
        j = json.loads(line)
        return cls({int(b): n for b, n in j["keys"].items()}, {int(b): n for b, n in j["bytes"].items()}, j["error"])


def scan(job: ScanJob, input_key: Callable[[bytes], bytes] | None = None) -> ScanResult:
    """Write every entry of `job.folder` to its bucket's SST file (sorted already: a scan is in key order).

    `input_key` maps a stored key to the input key the router hashes (StoreDescriptor.input_key_of);
    by default they are the same bytes. Only buckets in `job.outputs` may receive entries.
    """
    g = job.factor
    keys, size = [0] * g, [0] * g
    writers: list[SstFileWriter] = []
    puts: list[Callable[[bytes, bytes], None] | None] = [None] * g

    def first_put(b: int, path: str) -> Callable[[bytes, bytes], None]:
        def put(k: bytes, v: bytes) -> None:  # opens the file on its first entry: an SST file cannot be empty
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            w = SstFileWriter(Options(raw_mode=True))
            w.open(path)
            writers.append(w)
            puts[b] = w.__setitem__
            w[k] = v

        return put

    for b, path in job.outputs.items():
        puts[b] = first_put(b, path) if path is not None else _count_only
    h64 = xxhash.xxh64_intdigest
    db = Rdict(job.folder, Options(raw_mode=True), access_type=AccessType.read_only())
    try:
        for k, v in cast(Iterator[tuple[bytes, bytes]], db.items()):  # raw mode: bytes (the stub types its pickling mode)
            h = h64(k if input_key is None else input_key(k), SEED)
            b = (h - _2_64 if h >= _2_63 else h) % g  # key_bucket, inlined: pmod of the signed hash
            put = puts[b]
            if put is None:
                return ScanResult(
                    error=f"store {job.store!r} of task {job.source!r} holds key {k!r} of bucket {b} at factor {g}, "
                    "which is not a share of that task; nothing was changed"
                )
            put(k, v)
            keys[b] += 1
            size[b] += len(k) + len(v)
    finally:
        db.close()
        for w in writers:
            w.finish()
    return ScanResult({b: n for b, n in enumerate(keys) if n}, {b: n for b, n in enumerate(size) if keys[b]})


def _count_only(k: bytes, v: bytes) -> None:
    pass


class ScanWorkers:
    """Worker processes that run scan jobs, each job on an idle one; `run` blocks its thread, not the GIL."""

    def __init__(self, count: int) -> None:
        self._procs = [
            subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            for _ in range(count)
        ]
        self._idle: queue.Queue[subprocess.Popen] = queue.Queue()
        for p in self._procs:
            self._idle.put(p)

    def run(self, job: ScanJob) -> ScanResult:
        p = self._idle.get()
        try:
            line = ""
            stdin, stdout = p.stdin, p.stdout
            assert stdin is not None and stdout is not None  # opened with PIPE
            if p.poll() is None:
                with contextlib.suppress(OSError):
                    stdin.write(job.to_json() + "\n")
                    stdin.flush()
                    line = stdout.readline()
            if not line:
                raise RuntimeError(f"bucket scan worker {p.pid} exited with {p.wait()} (scanning {job.folder})")
            return ScanResult.from_json(line)
        finally:
            self._idle.put(p)

    def close(self) -> None:
        for p in self._procs:
            with contextlib.suppress(OSError):
                if p.stdin is not None:
                    p.stdin.close()
        for p in self._procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def answer(line: str) -> str:
    """A worker's reply to one job line; a failure is in the reply, for the move to raise."""
    try:
        result = scan(ScanJob.from_json(line))
    except Exception as e:  # noqa: BLE001 - the answer carries it to the move, which fails
        result = ScanResult(error=f"bucket scan failed: {type(e).__name__}: {e}")
    return result.to_json()


def main() -> None:
    for line in sys.stdin:
        sys.stdout.write(answer(line) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
