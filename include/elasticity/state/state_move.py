"""A state move as the rescale records it (SEP-32's state migration): what each new virtual task's stores
received, the checkpoint id of every snapshot it wrote, and its journal, the blob that lets a later attempt
delete what a crashed or superseded one uploaded and never what a live one is writing."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from elasticity import faults
from elasticity.api.descriptors import StoreDescriptor
from elasticity.checkpoint.task_checkpoint import CheckpointId, TaskCheckpoint
from elasticity.jobmodel.model import TaskName
from elasticity.state.backends.blob_manager import BlobStoreManager
from elasticity.state.backends.blobstore import checkpoint_of, job_prefix, store_prefix
from elasticity.state.commit_manager import Markers
from elasticity.state.store_config import StorageConfig

log = logging.getLogger(__name__)

JOURNALS = "rescale/"  # under the job's blob prefix: one JSON blob per attempt not known to be finished


@dataclass(frozen=True, kw_only=True)
class Transfer:
    """What one new (virtual task, store) receives."""

    task: TaskName
    store: str
    sources: tuple[TaskName, ...]
    keys: int = 0
    bytes: int = 0  # serialised keys and values
    how: str = "moved"  # moved | kept (the old snapshot, as it is) | empty (no source committed state) | cleared (a replay's)


@dataclass(frozen=True, kw_only=True)
class StateMove:
    old_factor: int
    new_factor: int
    checkpoint_id: CheckpointId  # of every snapshot the move writes
    from_generation: int
    transfers: tuple[Transfer, ...]
    checkpoint_ids: Mapping[TaskName, CheckpointId]  # per new task with state
    markers: Mapping[TaskName, Markers]
    dry_run: bool = False
    state_move_ns: int = 0
    journal: str | None = None

    def apply(self, cps: Mapping[TaskName, TaskCheckpoint]) -> dict[TaskName, TaskCheckpoint]:
        """The migrated checkpoints with the state they now commit."""
        return {
            t: TaskCheckpoint(
                task_name=cp.task_name,
                offsets=cp.offsets,
                watermarks=cp.watermarks,
                checkpoint_id=self.checkpoint_ids[t],
                state_markers=self.markers.get(t, {}),
            )
            if t in self.checkpoint_ids
            else cp
            for t, cp in cps.items()
        }

    def describe(self) -> str:
        verb = "would move" if self.dry_run else "moved"
        moved = [t for t in self.transfers if t.how == "moved"]
        lines = [
            f"state: {verb} {sum(t.keys for t in moved):,} keys, {sum(t.bytes for t in moved):,} bytes "
            f"(factor {self.old_factor} -> {self.new_factor}, snapshots {self.checkpoint_id})"
        ]
        for t in sorted(self.transfers, key=lambda t: (t.task, t.store)):
            src = " + ".join(s.name for s in t.sources) or "(no source)"
            what = {
                "moved": f"{t.keys:,} keys, {t.bytes:,} bytes",
                "kept": "keeps its committed snapshot",
                "empty": "empty (no committed state in its sources)",
                "cleared": "cleared (a replay rebuilds it)",
            }[t.how]
            lines.append(f"  {t.task.name} <- {src}: {t.store} {what}")
        return "\n".join(lines)


def write_journal(
    storage: StorageConfig,
    blobs: BlobStoreManager,
    moving: Mapping[TaskName, tuple[TaskName, ...]],
    descriptors: Sequence[StoreDescriptor],
    *,
    cp_id: CheckpointId,
    from_generation: int,
    epoch: int | None,
) -> str:
    """The move's journal, written before any upload: the prefixes it may fill, for `clean_stale_moves`."""
    journal = f"{job_prefix(storage.job_name, storage.job_id)}{JOURNALS}{cp_id}.json"
    prefixes = sorted(store_prefix(storage.job_name, storage.job_id, t, d.name) for t in moving for d in descriptors)
    entry = {"checkpoint-id": str(cp_id), "from-generation": from_generation, "epoch": epoch, "prefixes": prefixes}
    blobs.put_bytes(journal, json.dumps(entry).encode())
    faults.point("rescale.state.journal_written")
    return journal


def clean_stale_moves(
    storage: StorageConfig, current_generation: int, *, epoch: int | None = None, check: Callable[[], None] | None = None
) -> list[str]:
    """Delete what crashed or superseded attempts uploaded; returns the journals handled.

    An attempt that started from the current generation never committed: its
    blobs (those of its checkpoint id under its prefixes) go. One from an
    older generation committed (or was overtaken): its blobs may be in use and stay.
    `check` (the store's: is the lease still this attempt's?) runs first and raises when it is not; with `epoch`
    (this attempt's), a journal of a later epoch is a live attempt's and is left alone.
    """
    if check is not None:
        check()
    blobs = BlobStoreManager(storage.blob_uri)
    done = []
    for journal in blobs.list(f"{job_prefix(storage.job_name, storage.job_id)}{JOURNALS}"):
        try:
            j = json.loads(blobs.get_bytes(journal))
            cp_id, gen, prefixes = CheckpointId.parse(j["checkpoint-id"]), int(j["from-generation"]), j["prefixes"]
            theirs = j.get("epoch")
        except (ValueError, KeyError, TypeError, FileNotFoundError) as e:
            log.warning("state move journal %s unreadable (%s); removing it", journal, e)
            blobs.delete(journal)
            continue
        if epoch is not None and theirs is not None and int(theirs) > epoch:
            continue  # a later attempt's move, under way
        if gen == current_generation:
            for prefix in prefixes:
                for blob in blobs.list(prefix):
                    if checkpoint_of(blob) == cp_id:
                        blobs.delete(blob)
            log.info("removed the snapshots of state move %s, which never committed", cp_id)
        blobs.delete(journal)
        faults.point("rescale.state.stale_cleaned")
        done.append(journal)
    return done


def discard(storage: StorageConfig, move: StateMove) -> None:
    """A move whose generation was refused (its attempt superseded, or the job moved on): its own snapshots, by
    its checkpoint id, and its journal. A successor that cleaned the journal first left these behind, uploaded
    after its cleanup; no one else writes under this checkpoint id."""
    blobs = BlobStoreManager(storage.blob_uri)
    moved = {store_prefix(storage.job_name, storage.job_id, t.task, t.store) for t in move.transfers if t.how != "kept"}
    for prefix in sorted(moved):
        for blob in blobs.list(prefix):
            if checkpoint_of(blob) == move.checkpoint_id:
                blobs.delete(blob)
    if move.journal is not None:
        blobs.delete(move.journal)


def finish(storage: StorageConfig, move: StateMove) -> None:
    """After the new generation is written: the journal is no longer needed."""
    if move.journal is not None:
        BlobStoreManager(storage.blob_uri).delete(move.journal)
