"""MessageStream and its operators, as a small graph the executor runs per virtual task.

Operators: map, filter, flat_map, flat_map_async (Samza's flatMapAsync: a
coroutine per message, at most `task.max.concurrency` in flight, outputs still
in input order), merge, partition_by (to an intermediate Kafka topic that the
job reads as another input), window (keyed event-time windows, `api.window`),
join (with a table fed by side inputs) and send_to. An input record is done,
and may be checkpointed, once everything derived from it has reached a terminal
operator.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from elasticity.api.context import TaskContext
from elasticity.api.descriptors import StoreDescriptor, TableDescriptor
from elasticity.api.window import Window, WindowOperator
from elasticity.config.names import JOB_NAME_ALLOWED, TOPIC_ALLOWED, is_job_name, is_topic
from elasticity.jobmodel.model import SystemStream, SystemStreamPartition


class KV(NamedTuple):
    """A keyed output; anything else sent to an output keeps the key of its input record."""

    key: Any
    value: Any


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """An input record, decoded (slots: one is built per record)."""

    key: Any
    value: Any
    ssp: SystemStreamPartition
    offset: int
    timestamp: int
    context: TaskContext | None = field(default=None, compare=False, repr=False)  # the virtual task's stores


@dataclass(frozen=True)
class OutputStream:
    """`kafka.<topic>` or `parquet.<name>` (under `job.output.path`). Parquet outputs are exactly-once (a
    replayed batch overwrites its own files); Kafka outputs too by default (`processing.guarantee=exactly_once`:
    one transaction with the batch's commit record, visible to read_committed readers if and only if the batch
    commits), or at-least-once with `processing.guarantee=at_least_once` (sent again on a replay)."""

    system: str
    name: str

    @property
    def kind(self) -> str:
        return "parquet" if self.system == "parquet" else "kafka"


JOIN_KINDS = ("inner", "left")


@dataclass(frozen=True)
class JoinSpec:
    """A stream-table join (Samza's StreamTableJoinFunction): `fn(item, record)`, the record looked
    up by `key_fn(item)` (default: the item's key); inner drops an item without a record, left
    passes it with None."""

    table: str
    fn: Callable[[Any, Any], Any]
    key_fn: Callable[[Any], Any] | None = None
    kind: str = "inner"

    def __post_init__(self) -> None:
        if self.kind not in JOIN_KINDS:
            raise ValueError(f"join kind {self.kind!r} is not one of {list(JOIN_KINDS)}")


@dataclass(eq=False, kw_only=True)
class Node:
    op: str  # input | map | filter | flat_map | flat_map_async | merge | window | join | send_to
    fn: Callable[..., Any] | None = None
    output: OutputStream | None = None
    stream: SystemStream | None = None
    children: list[Node] = field(default_factory=list)
    name: str = ""
    window: WindowOperator | None = None
    join: JoinSpec | None = None


class MessageStream:
    """A stream of items within one virtual task: an input's `Message`s, then what operators make of them.
    Every operator sees the items of a task's slice in input order, so the order of each key holds; an exception
    in an operator's function is charged to the input record it derives from (`task.dead.letter.policy`)."""

    def __init__(self, app: ApplicationDescriptor, node: Node) -> None:
        self._app = app
        self._node = node

    def _then(self, op: str, fn: Callable[..., Any] | None = None, name: str | None = None, **kw: Any) -> MessageStream:
        node = Node(op=op, fn=fn, name=name or f"{op}-{self._app._next_id()}", **kw)
        self._node.children.append(node)
        return MessageStream(self._app, node)

    def map(self, fn: Callable[[Any], Any]) -> MessageStream:
        """`fn(item)` for each item, in input order: one item out per item in."""
        return self._then("map", fn)

    def filter(self, fn: Callable[[Any], bool]) -> MessageStream:
        """The items for which `fn(item)` is true, in input order."""
        return self._then("filter", fn)

    def flat_map(self, fn: Callable[[Any], Iterable[Any]]) -> MessageStream:
        """Every item `fn(item)` returns (none, one or many), in input order, each item's in the order returned."""
        return self._then("flat_map", fn)

    def flat_map_async(self, fn: Callable[[Any], Awaitable[Iterable[Any]]]) -> MessageStream:
        """Samza's flatMapAsync: `await fn(item)` for each item, at most `task.max.concurrency` calls in flight
        per virtual task (each bounded by `task.callback.timeout.ms`), their results passed on in input order
        whatever order the calls finish in."""
        return self._then("flat_map_async", fn)

    def merge(self, *others: MessageStream) -> MessageStream:
        """One stream of this one's items and `others`', interleaved by input order (within a virtual task)."""
        node = Node(op="merge", name=f"merge-{self._app._next_id()}")
        for s in (self, *others):
            s._node.children.append(node)
        return MessageStream(self._app, node)

    def window(self, window: Window, id: str) -> MessageStream:
        """Samza's `window(windows, id)`: a stream of `WindowPane`s, each emitted once, when the watermark
        closes its window. The window's state is the store named `id` (configure it as any store)."""
        if id in self._app.windows:
            raise ValueError(f"window id {id!r} is used twice: each window needs its own (it names its store)")
        self._app.store(window.store(id))
        self._app.windows.add(id)
        return self._then("window", window=WindowOperator(window, id), name=id)

    def join(
        self,
        table: TableDescriptor | str,
        fn: Callable[[Any, Any], Any],
        key_fn: Callable[[Any], Any] | None = None,
        kind: str = "inner",
    ) -> MessageStream:
        """Stream-table join (Samza's `join(table, joinFn)`): `fn(item, record)` for each item whose key
        (`key_fn(item)`, default the item's key) the table holds; `kind="left"` also passes the others, with None."""
        name = table.name if isinstance(table, TableDescriptor) else table
        if name not in self._app.tables:
            raise ValueError(f"join: the app declares no table {name!r} (app.table(TableDescriptor(...)) declares one)")
        return self._then("join", join=JoinSpec(name, fn, key_fn, kind))

    def send_to(self, output: OutputStream | str) -> None:
        """Write each item to `output` (`kafka.<topic>`, `parquet.<name>` or an `OutputStream`), in input order:
        a `KV` or a `Message` as its key and value, a `WindowPane` under its key, anything else as the value
        under the key of the input record it comes from. An input record is
        done once everything derived from it has been sent. Delivery: see `OutputStream`."""
        out = self._app.output(output) if isinstance(output, str) else output
        self._then("send_to", output=out)

    def partition_by(
        self, key_fn: Callable[[Any], Any], intermediate: str, value_fn: Callable[[Any], Any] | None = None
    ) -> MessageStream:
        """Re-key through an intermediate topic (`kafka.<topic>`, listed in task.inputs);
        the returned stream is that topic's, read by later batches."""
        value_fn = value_fn or (lambda item: item.value if isinstance(item, Message) else item)
        self.map(lambda item: KV(key_fn(item), value_fn(item))).send_to(intermediate)
        return self._app.input(intermediate)


class ApplicationDescriptor:
    def __init__(self, job_inputs: tuple[SystemStream, ...] = ()) -> None:
        self.job_inputs = job_inputs  # task.inputs, for apps that handle every input alike
        self.inputs: dict[SystemStream, Node] = {}
        self.outputs: dict[str, OutputStream] = {}
        self.stores: dict[str, StoreDescriptor] = {}
        self.tables: dict[str, TableDescriptor] = {}
        self.windows: set[str] = set()
        self.references: dict[str, Callable[..., dict[Any, Any]]] = {}
        self._ids = 0

    def _next_id(self) -> int:
        self._ids += 1
        return self._ids

    def input(self, stream: SystemStream | str) -> MessageStream:
        ss = stream if isinstance(stream, SystemStream) else SystemStream.parse(stream)
        node = self.inputs.setdefault(ss, Node(op="input", stream=ss, name=f"input-{ss}"))
        return MessageStream(self, node)

    def store(
        self,
        name: str | StoreDescriptor,
        key_serde: str = "string",
        value_serde: str = "json",
        input_key: Callable[[Any], bytes] | None = None,
    ) -> StoreDescriptor:
        """Declare a key-value store (Samza's `StoreDescriptor`); operators reach it as
        `m.context.store(name)`, one per virtual task, keyed by the input key."""
        d = name if isinstance(name, StoreDescriptor) else StoreDescriptor(name, key_serde, value_serde, input_key)
        if d.name in self.tables:
            raise ValueError(f"store {d.name!r}: a table has that name already")
        if self.stores.get(d.name, d) != d:
            raise ValueError(f"store {d.name!r} is declared twice, differently")
        return self.stores.setdefault(d.name, d)

    def table(self, table: TableDescriptor) -> TableDescriptor:
        """Declare a table fed by side inputs (Samza's `app.getTable(descriptor)`), for `join`."""
        if table.name in self.stores:
            raise ValueError(f"table {table.name!r}: a store has that name already")
        if self.tables.get(table.name, table) != table:
            raise ValueError(f"table {table.name!r} is declared twice, differently")
        return self.tables.setdefault(table.name, table)

    def state_reference(self, store: str, fold: Callable[..., dict[Any, Any]]) -> None:
        """How to recompute store `store` from the processed input records (in offset order per
        partition): the `state` data-quality check compares the committed store with it. A fold
        `fold(messages, start=None)` that takes the store's expected contents before `messages`
        as `start` is applied to each run's new batches only (its cost flat in the job's age);
        `fold(messages)` is recomputed from the job's first batch every run."""
        if store not in self.stores:
            raise ValueError(f"state_reference({store!r}): the app declares no such store ({sorted(self.stores)})")
        self.references[store] = fold

    def output(self, spec: str) -> OutputStream:
        system, sep, name = spec.partition(".")
        if not sep or not name:
            raise ValueError(f"output {spec!r}: expected kafka.<topic> or parquet.<name>")
        if system == "parquet" and not is_job_name(name):  # one folder under job.output.path, never `..`
            raise ValueError(f"output {spec!r}: a Parquet output's name is a folder: {JOB_NAME_ALLOWED}")
        if system != "parquet" and not is_topic(name):
            raise ValueError(f"output {spec!r}: {name!r} is not {TOPIC_ALLOWED}")
        return self.outputs.setdefault(spec, OutputStream(system, name))


def load_application(spec: str, inputs: Iterable[SystemStream]) -> ApplicationDescriptor:
    """Build the app named by `app.class=module:factory`."""
    app = ApplicationDescriptor(tuple(inputs))
    module_name, sep, attr = spec.partition(":")
    if not sep:
        raise ValueError(f"app.class={spec!r}: expected module:factory")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name is None or not (module_name == e.name or module_name.startswith(e.name + ".")):
            raise  # the app's module is there, something it imports is not
        raise ValueError(
            f"app.class={spec!r}: no module {e.name!r} on this Python's path; put the app's package on PYTHONPATH (or "
            "install it) where the job's driver runs: the CLI or Airflow task (the executors get it from there)"
        ) from None
    factory = getattr(module, attr)
    factory(app)
    missing = set(app.inputs) - set(app.job_inputs)
    if missing:
        raise ValueError(f"app.class={spec!r} reads {sorted(map(str, missing))}, which task.inputs does not list")
    return app
