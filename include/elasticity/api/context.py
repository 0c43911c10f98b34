"""What an operator knows about the virtual task it runs for (Samza's TaskContext):
its name and its stores, `m.context.store("totals")` as Samza's
`context.getTaskContext().getStore("totals")`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..model import TaskName


@dataclass(frozen=True)
class TaskContext:
    task_name: TaskName
    stores: Callable[[str], Any] | None = None  # store name -> the task's KeyValueStore

    def store(self, name: str) -> Any:
        """The virtual task's store `name` (a state.KeyValueStore): get, put, delete, put_all, range, prefix, all."""
        if self.stores is None:
            raise KeyError(f"task {self.task_name.name!r}: the app declares no store (app.store({name!r}, ...) declares one)")
        return self.stores(name)
