"""Job identity: which checkpoint store the sinks' contents belong to.

The exactly-once sinks are keyed by batch id, and batch ids come from the store.
A store that was lost, reset, or pointed at another database starts the job
again (new first generation, batch ids from 1), and its batches would land
beside, or over, what the old store's batches wrote. So the job's identity (its
name and when its first generation was created) is written beside its sinks as
`_job_identity.json` (a name Parquet readers skip), and a start whose store does
not know that identity fails, naming both, unless the operator asks to move the
old outputs aside (`--reset-sinks`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from functools import partial

import pyarrow.fs as pafs
from sqlalchemy.engine import make_url

from elasticity.batch.sinks.outputs import check_typed_outputs
from elasticity.checkpoint.store import CheckpointStore, StoreError
from elasticity.config import JobConfig

IDENTITY_FILE = "_job_identity.json"
SINK_KEYS = ("job.output.path", "job.audit.path", "job.dead.letter.path")  # the roots guard_sinks reads, in this order


class IdentityMismatch(StoreError):
    """The sinks were written under a store that is not this one."""


@dataclass(frozen=True)
class JobIdentity:
    job_name: str
    first_generation_ms: int
    store: str  # where it was created, password hidden: for the operator reading the error

    def same_job(self, other: JobIdentity) -> bool:
        """The same job of the same store, however the store's URL was spelled."""
        return (self.job_name, self.first_generation_ms) == (other.job_name, other.first_generation_ms)

    def describe(self) -> str:
        created = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(self.first_generation_ms / 1000))
        return f"job {self.job_name!r} first generation created {created} UTC ({self.first_generation_ms}) in {self.store}"


def store_identity(config: JobConfig, store: CheckpointStore) -> JobIdentity | None:
    """The identity the store knows for the job, None while it has no first generation."""
    first = store.generation(config.job_name, 1)
    if first is None:
        return None
    return JobIdentity(config.job_name, first.created_ms, make_url(store.url).render_as_string(hide_password=True))


def _fs(root: str) -> tuple[pafs.FileSystem, str]:
    return pafs.FileSystem.from_uri(root) if "://" in root else (pafs.LocalFileSystem(), root)


def _read(root: str) -> JobIdentity | None:
    fs, base = _fs(root)
    path = f"{base.rstrip('/')}/{IDENTITY_FILE}"
    if fs.get_file_info(path).type != pafs.FileType.File:
        return None
    with fs.open_input_stream(path) as f:
        return JobIdentity(**json.loads(f.read()))


def _write(root: str, identity: JobIdentity) -> None:
    fs, base = _fs(root)
    fs.create_dir(base, recursive=True)
    with fs.open_output_stream(f"{base.rstrip('/')}/{IDENTITY_FILE}") as f:
        f.write(json.dumps(asdict(identity), indent=2).encode())


def _check(
    config: JobConfig,
    store: CheckpointStore,
    known: JobIdentity | None,
    *,
    found: list[tuple[str, JobIdentity | None]],
    reset: bool,
) -> dict[str, str]:
    """Fail when a sink root carries another identity than the store's (or the store has none).

    With `reset`, such a root is moved aside to `<root>.reset-<millis>` instead;
    returns each root moved and where it went.
    """
    moved = {}
    for key, (root, theirs) in zip(SINK_KEYS, found, strict=True):
        if theirs is None or (known is not None and theirs.same_job(known)):
            continue
        if not reset:
            ours = known.describe() if known else f"no generation of job {config.job_name!r}"
            raise IdentityMismatch(
                f"{key}={root} holds the outputs of {theirs.describe()}, but the checkpoint store "
                f"({make_url(store.url).render_as_string(hide_password=True)}) has {ours}. Its batch ids would "
                "collide with those outputs: point task.checkpoint.store.url at the store that wrote them, or pass "
                "--reset-sinks to move the old outputs aside"
            )
        moved[root] = _move_aside(root)
    return moved


def _move_aside(root: str) -> str:
    """`<root>` to `<root>.reset-<millis>`: a rename on a local disk; on object storage (S3, a cluster's shared
    storage), which has no rename of a folder, a copy of every file, then the old ones deleted deepest first
    (SeaweedFS still lists the subfolders of a folder deleted at once, and no reader can open them)."""
    fs, base = _fs(root)
    base = base.rstrip("/")
    suffix = f".reset-{int(time.time() * 1000)}"
    if isinstance(fs, pafs.LocalFileSystem):
        fs.move(base, base + suffix)
        return root.rstrip("/") + suffix
    pafs.copy_files(base, base + suffix, source_filesystem=fs, destination_filesystem=fs)
    for entry in sorted(fs.get_file_info(pafs.FileSelector(base, recursive=True)), key=lambda e: -e.path.count("/")):
        if entry.type == pafs.FileType.Directory:
            fs.delete_dir(entry.path)
        else:
            fs.delete_file(entry.path)
    fs.delete_dir(base)
    return root.rstrip("/") + suffix


def guard_sinks(config: JobConfig, store: CheckpointStore, initialize: Callable[[], object], *, reset: bool = False) -> list[str]:
    """At a start: check the sinks against the store (and the typed outputs' schemas), create the job's first generation if it is
    new (`initialize()`), then mark the sinks with its identity. Each root is read once, all of them
    side by side (on object storage each read is a round trip). Returns the roots moved aside."""
    roots = [config.output_dir, config.audit_dir, config.dead_letter_dir]
    with ThreadPoolExecutor(len(roots)) as pool:
        found = list(zip(roots, pool.map(_read, roots), strict=True))
    known = store_identity(config, store)
    moved = _check(config, store, known, found=found, reset=reset)
    check_typed_outputs(config)  # the typed outputs' schemas against the files they have written
    if known is None:
        initialize()
        known = store_identity(config, store)
        if known is None:
            raise StoreError(f"job {config.job_name!r} has no first generation yet in {store.url}")
    unmarked = sorted({root for root, theirs in found if theirs is None or root in moved})
    if unmarked:
        with ThreadPoolExecutor(len(unmarked)) as pool:
            list(pool.map(partial(_write, identity=known), unmarked))
    return list(moved.values())
