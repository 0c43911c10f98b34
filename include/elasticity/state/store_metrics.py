"""Per-store metrics, named as Samza's (get-ns, put-ns, ...) plus SEP-32's
store-identify-ns: the time spent checking that a written key belongs to the
virtual task. Counters only grow; the engine folds `as_dict()` into its batch
summary."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(kw_only=True)
class StoreMetrics:
    gets: int = 0
    get_ns: int = 0
    puts: int = 0
    put_ns: int = 0
    deletes: int = 0
    delete_ns: int = 0
    store_identify_ns: int = 0
    restore_ns: int = 0
    restores: int = 0  # from a backend (the blob store, the changelog): not open or local already
    restore_bytes: int = 0  # the restored store's size on disk: what those restores brought over
    snapshot_ns: int = 0
    upload_ns: int = 0
    bytes_uploaded: int = 0  # by the last commit
    disk_usage_bytes: int = 0  # at the last snapshot

    def as_dict(self) -> dict[str, int]:
        return {k.replace("_", "-"): v for k, v in asdict(self).items()}
