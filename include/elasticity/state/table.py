"""Tables fed by side inputs (Samza's side-input stores), for stream-table joins.

A table is replicated: every process slot of a container holds all of it, in a
RocksDB under `job.state.dir/side-inputs/<table>/slot-<slot>`, read from the
whole of its compacted side-input topics. It belongs to no virtual task, so a
rescale moves nothing: the slots of the new job model catch up from their own
folders, or rebuild from the topic.

The replay rule: when the driver plans a batch it records, with the plan, the
high watermark of every side-input partition; the batch's tables are read up to
exactly those offsets, before any slice runs, and do not change during it. A
replayed batch has the same plan, so it joins against the same table. A slot's
folder remembers how far it has read (`OFFSETS`, written after the data is
flushed; re-applying records is harmless since the processor depends on the
record alone) and only reads on from there; a folder that has read past a
batch's offsets (a rescale changed which folder a slot uses), or none at all, is
rebuilt from the topic's start. Such a rebuild is exact as long as compaction
has not dropped a record below the batch's offsets that a later record
superseded.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import shutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocksdict import WriteBatch

from elasticity.api.descriptors import TableDescriptor
from elasticity.config import JobConfig
from elasticity.config.runtime_rules import table_side_inputs
from elasticity.jobmodel.model import SystemStream, SystemStreamPartition
from elasticity.jobmodel.object_mapper import ssp_to_key
from elasticity.kafka import clients
from elasticity.kafka.clients import Kafka
from elasticity.kafka.consumer import STALL_TIMEOUT_S, read_range
from elasticity.serializers import DESERIALIZERS, SERIALIZERS, RecordSerdeError, Serde, deserialize
from elasticity.state.rocksdb import open_db
from elasticity.state.store_config import local_state_dir

log = logging.getLogger(__name__)
OFFSETS_FILE = "OFFSETS"
Processor = Callable[[Any], Iterable[tuple[Any, Any]]]


@dataclass(frozen=True)
class TableSource:
    """A table's side inputs and processor as the job configures them (driver side)."""

    name: str
    streams: tuple[SystemStream, ...]
    processor_factory: str | None = None


def resolve_tables(config: JobConfig, tables: Mapping[str, TableDescriptor]) -> tuple[TableSource, ...]:
    """`stores.<t>.side.inputs` and `.side.inputs.processor.factory` over each descriptor; a key naming
    no table, or a table without side inputs, fails naming the key."""
    streams = table_side_inputs(config, {name: d.side_inputs for name, d in tables.items()})
    return tuple(
        TableSource(name, s, config.raw_map.get(f"stores.{name}.side.inputs.processor.factory")) for name, s in streams.items()
    )


@dataclass(frozen=True, kw_only=True)
class TableBatch:
    """One table in one batch (plain values, shipped to the workers)."""

    name: str
    targets: tuple[tuple[SystemStreamPartition, int], ...]  # side-input partition -> read up to (exclusive)
    bootstraps: tuple[tuple[str, Kafka], ...]  # system -> its consumer's settings
    serdes: tuple[tuple[str, Serde, Serde], ...]  # system.stream (or a system) -> key, msg serde of the side inputs
    processor_factory: str | None = None


@dataclass(frozen=True)
class SideInputBatch:
    job_name: str
    state_dir: str | None  # None: this host's default (store_config.local_state_dir)
    tables: tuple[TableBatch, ...]


class SideInputTable:
    """A slot's copy of one table: caught up to the batch's offsets, then read-only (Samza's ReadableTable)."""

    def __init__(self, folder: Path, descriptor: TableDescriptor, batch: TableBatch, processor: Processor | None) -> None:
        self.folder, self.descriptor, self.batch, self.processor = folder, descriptor, batch, processor
        self.offsets: dict[str, int] = self._read_offsets()
        targets = {ssp_to_key(s): o for s, o in batch.targets}
        if not self.offsets and (folder / "db").exists() or any(self.offsets.get(k, 0) > o for k, o in targets.items()):
            shutil.rmtree(folder, ignore_errors=True)  # read past this batch, or never sealed: rebuild
            self.offsets = {}
        self.db = open_db(folder / "db")
        self.read_records = 0

    def _read_offsets(self) -> dict[str, int]:
        try:
            return {k: int(v) for k, v in json.loads((self.folder / OFFSETS_FILE).read_text()).items()}
        except (OSError, ValueError):
            return {}

    def get(self, key: Any) -> Any:
        raw = self.db.get(SERIALIZERS[self.descriptor.key_serde](key))
        return None if raw is None else DESERIALIZERS[self.descriptor.value_serde](raw)

    def catch_up(self) -> None:
        """Read every side-input partition from where this copy is to the batch's offset."""
        bootstraps, serdes = dict(self.batch.bootstraps), {s: (k, m) for s, k, m in self.batch.serdes}
        behind = [
            (ssp, self.offsets.get(ssp_to_key(ssp), 0), target)
            for ssp, target in self.batch.targets
            if self.offsets.get(ssp_to_key(ssp), 0) < target
        ]
        if not behind:
            return
        # unsealed while it moves: a crash now leaves a folder that a replay of an earlier batch must not trust
        (self.folder / OFFSETS_FILE).unlink(missing_ok=True)
        for ssp, start, target in behind:
            by = serdes.get(f"{ssp.system}.{ssp.stream}") or serdes[ssp.system]  # the stream's, else its system's
            self.apply(self._read(bootstraps[ssp.system], ssp, start, target), ssp, *by)
            self.offsets[ssp_to_key(ssp)] = target
        self.db.flush(True)
        tmp = self.folder / f".{OFFSETS_FILE}.tmp"
        tmp.write_text(json.dumps(self.offsets, sort_keys=True))
        os.replace(tmp, self.folder / OFFSETS_FILE)

    def apply(
        self,
        records: Iterable[tuple[int, bytes | None, bytes | None, int]],
        ssp: SystemStreamPartition,
        key_serde: Serde,
        msg_serde: Serde,
    ) -> None:
        from elasticity.api.stream import Message

        d = self.descriptor
        batch = WriteBatch(raw_mode=True)
        for offset, k, v, ts in records:
            self.read_records += 1
            try:
                key = deserialize(key_serde, k, "key")
                value = deserialize(msg_serde, v, "value")
            except RecordSerdeError as e:
                log.warning("table %s: side-input record %s@%d skipped: %s", d.name, ssp, offset, e)
                continue
            entries = (
                [(key, value)]
                if self.processor is None
                else self.processor(Message(key=key, value=value, ssp=ssp, offset=offset, timestamp=ts))
            )
            for ek, ev in entries:
                if ek is None:
                    continue
                kb = SERIALIZERS[d.key_serde](ek)
                if ev is None:
                    batch.delete(kb)
                else:
                    batch.put(kb, SERIALIZERS[d.value_serde](ev))
        self.db.write(batch)

    @staticmethod
    def _read(
        bootstrap: Kafka, ssp: SystemStreamPartition, start: int, end: int
    ) -> list[tuple[int, bytes | None, bytes | None, int]]:
        c = clients.log_reader(bootstrap, "elasticity-side-input")

        def stalled(position: int) -> TimeoutError:
            return TimeoutError(
                f"side input {ssp}: no records after offset {position} (reading up to {end}) "
                f"from {bootstrap} for {STALL_TIMEOUT_S:.0f}s"
            )

        try:  # from the log start when `start` is no longer in the log
            found = read_range(c, ssp.stream, ssp.partition, start=start, end=end, stalled=stalled)
            return [(m.offset(), m.key(), m.value(), m.timestamp()[1]) for m in found]  # type: ignore[misc]
        finally:
            c.close()

    def close(self) -> None:
        self.db.close()


def _processor(descriptor: TableDescriptor, factory: str | None) -> Processor | None:
    if factory is None:
        return descriptor.processor
    module, _, attr = factory.partition(":")
    return getattr(importlib.import_module(module), attr)()


class SlotTables:
    """The tables of one process slot for one batch: opened and caught up before the slices run, closed after
    (the next batch of this slot may run in another Python worker, and RocksDB admits one process per folder)."""

    def __init__(self, batch: SideInputBatch, descriptors: Mapping[str, TableDescriptor], slot: int) -> None:
        self.tables: dict[str, SideInputTable] = {}
        try:
            for tb in batch.tables:
                d = descriptors[tb.name]
                folder = local_state_dir(batch.state_dir, batch.job_name) / "side-inputs" / tb.name / f"slot-{slot}"
                table = self.tables[tb.name] = SideInputTable(folder, d, tb, _processor(d, tb.processor_factory))
                table.catch_up()
        except BaseException:
            self.close()
            raise

    def table(self, name: str) -> SideInputTable:
        if name not in self.tables:
            raise KeyError(f"no table {name!r} (declared: {sorted(self.tables)})")
        return self.tables[name]

    def close(self) -> None:
        for t in self.tables.values():
            t.close()
