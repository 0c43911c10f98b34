"""One CheckpointStore per store URL for a long-lived process that serves many jobs (Airflow's API server):
each store's engine pools its connections, so a request opens none of its own and inspects no schema."""

from __future__ import annotations

import threading

from elasticity.checkpoint.store import CheckpointStore


class StorePool:
    def __init__(self) -> None:
        self._stores: dict[tuple[str, int], CheckpointStore] = {}
        self._lock = threading.Lock()

    def get(self, url: str, history_size: int) -> CheckpointStore:
        with self._lock:
            store = self._stores.get((url, history_size))
            if store is None:
                store = self._stores[(url, history_size)] = CheckpointStore(url, history_size)
            return store

    def close(self) -> None:
        with self._lock:
            stores, self._stores = list(self._stores.values()), {}
        for store in stores:
            store.close()

    def __enter__(self) -> StorePool:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
