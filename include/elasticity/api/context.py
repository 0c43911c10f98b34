"""What an operator knows about the virtual task it runs for (Samza's TaskContext):
its name, its stores (`m.context.store("totals")` as Samza's
`context.getTaskContext().getStore("totals")`) and the tables it joins with."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from elasticity.jobmodel.model import TaskName


class KeyValueStore(Protocol):
    """A virtual task's store, as `m.context.store(name)` gives it (Samza's KeyValueStore; the engine passes
    `elasticity.state.kv.KeyValueStore`). Keys are the input keys of the task's bucket (or a 1:1 function of
    them, `StoreDescriptor.input_key`): a write of another bucket's key fails."""

    def get(self, key: Any) -> Any: ...

    def get_all(self, keys: Iterable[Any]) -> dict[Any, Any]: ...

    def range(self, from_key: Any, to_key: Any) -> Iterator[tuple[Any, Any]]: ...

    def prefix(self, prefix: Any) -> Iterator[tuple[Any, Any]]: ...

    def all(self) -> Iterator[tuple[Any, Any]]: ...

    def put(self, key: Any, value: Any) -> None: ...

    def put_all(self, entries: Mapping[Any, Any] | Iterable[tuple[Any, Any]]) -> None: ...

    def delete(self, key: Any) -> None: ...

    def delete_all(self, keys: Iterable[Any]) -> None: ...


class Table(Protocol):
    """A table fed by side inputs, as `m.context.table(name)` gives it (the engine passes
    `elasticity.state.table.SideInputTable`): read only, the same in every virtual task."""

    def get(self, key: Any) -> Any: ...


@dataclass(frozen=True)
class TaskContext:
    task_name: TaskName
    stores: Callable[[str], KeyValueStore] | None = None  # store name -> the task's KeyValueStore
    tables: Callable[[str], Table] | None = None  # table name -> the container's side-input table

    def store(self, name: str) -> KeyValueStore:
        """The virtual task's store `name`: get, get_all, range, prefix, all, put, put_all, delete, delete_all."""
        if self.stores is None:
            raise KeyError(f"task {self.task_name.name!r}: the app declares no store (app.store({name!r}, ...) declares one)")
        return self.stores(name)

    def table(self, name: str) -> Table:
        """The table `name` (get), fed by its side inputs up to this batch's offsets."""
        if self.tables is None:
            raise KeyError(f"task {self.task_name.name!r}: the app declares no table (app.table(TableDescriptor({name!r}, ...)))")
        return self.tables(name)
