"""The key-value store an operator sees: Samza's KeyValueStore over one virtual
task's RocksDB, with the store's serdes.

A write whose key belongs to another virtual task's bucket fails: its state
would be read by the wrong task, and lost or duplicated by a rescale. The keys
written since the last snapshot are remembered for the Kafka changelog, which
sends each once per commit with its value at the snapshot.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from rocksdict import Rdict, WriteBatch

from elasticity.api.descriptors import StoreDescriptor
from elasticity.jobmodel.keybucket import key_hash
from elasticity.jobmodel.model import TaskName
from elasticity.jobmodel.tasknames import parse_task_name
from elasticity.state.rocksdb import raw_items
from elasticity.state.store_metrics import StoreMetrics


class WrongBucketError(ValueError):
    pass


class KeyValueStore:
    def __init__(
        self, descriptor: StoreDescriptor, task: TaskName, db: Rdict, *, metrics: StoreMetrics, track_changes: bool
    ) -> None:
        self.descriptor = descriptor
        self.task = task
        self.db = db
        self.metrics = metrics
        parsed = parse_task_name(task)
        self.bucket, self.factor = parsed.key_bucket, parsed.factor
        self.changes: set[bytes] | None = set() if track_changes else None
        self.written = False  # since the last snapshot

    # --- reads ---------------------------------------------------------------

    def get(self, key: Any) -> Any:
        start = time.perf_counter_ns()
        raw = self.db.get(self.descriptor.key_bytes(key))
        self.metrics.gets += 1
        self.metrics.get_ns += time.perf_counter_ns() - start
        return None if raw is None else self.descriptor.value_from(raw)

    def get_all(self, keys: Iterable[Any]) -> dict[Any, Any]:
        """The keys that have a value."""
        found = {}
        for k in keys:
            v = self.get(k)
            if v is not None:
                found[k] = v
        return found

    def range(self, from_key: Any, to_key: Any) -> Iterator[tuple[Any, Any]]:
        """Entries with from_key <= key < to_key, in serialised-key order."""
        end = self.descriptor.key_bytes(to_key)
        return self._scan(self.descriptor.key_bytes(from_key), lambda k: k < end)

    def prefix(self, prefix: Any) -> Iterator[tuple[Any, Any]]:
        """Entries whose serialised key starts with the serialised prefix (string and byte keys)."""
        if self.descriptor.key_serde == "json":
            raise TypeError(f"store {self.descriptor.name!r}: prefix scans need a string or byte key serde, not json")
        p = self.descriptor.key_bytes(prefix)
        return self._scan(p, lambda k: k.startswith(p))

    def all(self) -> Iterator[tuple[Any, Any]]:
        return self._scan(None, lambda k: True)

    def _scan(self, start: bytes | None, keep) -> Iterator[tuple[Any, Any]]:
        items = raw_items(self.db, start)
        d = self.descriptor
        for k, v in items:
            if not keep(k):
                return
            yield d.key_from(k), d.value_from(v)

    # --- writes --------------------------------------------------------------

    def put(self, key: Any, value: Any) -> None:
        """A None value deletes, as in Samza."""
        if value is None:
            self.delete(key)
            return
        raw = self._owned(key)
        start = time.perf_counter_ns()
        self.db.put(raw, self.descriptor.value_bytes(value))
        self.metrics.puts += 1
        self.metrics.put_ns += time.perf_counter_ns() - start
        self._changed(raw)

    def put_all(self, entries: Mapping[Any, Any] | Iterable[tuple[Any, Any]]) -> None:
        items = entries.items() if isinstance(entries, Mapping) else entries
        batch = WriteBatch(raw_mode=True)
        raws = []
        for k, v in items:
            raw = self._owned(k)
            raws.append(raw)
            if v is None:
                batch.delete(raw)
            else:
                batch.put(raw, self.descriptor.value_bytes(v))
        start = time.perf_counter_ns()
        self.db.write(batch)
        self.metrics.puts += len(raws)
        self.metrics.put_ns += time.perf_counter_ns() - start
        self._changed(*raws)

    def delete(self, key: Any) -> None:
        raw = self._owned(key)
        start = time.perf_counter_ns()
        self.db.delete(raw)
        self.metrics.deletes += 1
        self.metrics.delete_ns += time.perf_counter_ns() - start
        self._changed(raw)

    def delete_all(self, keys: Iterable[Any]) -> None:
        self.put_all((k, None) for k in keys)

    def _changed(self, *raws: bytes) -> None:
        self.written = True
        if self.changes is not None:
            self.changes.update(raws)

    def _owned(self, key: Any) -> bytes:
        """The serialised key, after checking that this task's bucket owns it (store-identify-ns)."""
        raw = self.descriptor.key_bytes(key)
        if self.factor > 1:
            start = time.perf_counter_ns()
            bucket = bucket_of(self.descriptor, raw, self.factor)
            self.metrics.store_identify_ns += time.perf_counter_ns() - start
            if bucket != self.bucket:
                raise WrongBucketError(
                    f"store {self.descriptor.name!r}: key {key!r} belongs to bucket {bucket} of factor {self.factor}, "
                    f"not to task {self.task.name!r} (bucket {self.bucket}); a store key must be the input key "
                    "or a 1:1 function of it declared with StoreDescriptor.input_key"
                )
        return raw


def bucket_of(descriptor: StoreDescriptor, raw_key: bytes, factor: int) -> int:
    """The key bucket that owns a stored (serialised) key, as the router computes it for its input key."""
    return key_hash(descriptor.input_key_of(raw_key)) % factor
