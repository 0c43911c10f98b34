"""What an operator knows about the virtual task it runs for (Samza's TaskContext):
its name, its stores (`m.context.store("totals")` as Samza's
`context.getTaskContext().getStore("totals")`) and the tables it joins with."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from elasticity.jobmodel.model import TaskName


@dataclass(frozen=True)
class TaskContext:
    task_name: TaskName
    stores: Callable[[str], Any] | None = None  # store name -> the task's KeyValueStore
    tables: Callable[[str], Any] | None = None  # table name -> the container's side-input table

    def store(self, name: str) -> Any:
        """The virtual task's store `name` (a state.KeyValueStore): get, put, delete, put_all, range, prefix, all."""
        if self.stores is None:
            raise KeyError(f"task {self.task_name.name!r}: the app declares no store (app.store({name!r}, ...) declares one)")
        return self.stores(name)

    def table(self, name: str) -> Any:
        """The table `name` (a state.table.SideInputTable: get), fed by its side inputs up to this batch's offsets."""
        if self.tables is None:
            raise KeyError(f"task {self.task_name.name!r}: the app declares no table (app.table(TableDescriptor({name!r}, ...)))")
        return self.tables(name)
