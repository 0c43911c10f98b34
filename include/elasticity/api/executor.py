"""Runs virtual tasks' slices through the application's operator graph: one
task's slice, or, in one pass, several tasks' slices laid end to end
(`segments` says where each ends; each message carries its own task's
context): at thousands of small virtual tasks a pass per slice cost more than
its records, so a slot's thread runs a unit of tasks in one pass.

Operator-at-a-time over the pass: each operator sees the items in input order,
so outputs keep that order (per key, too) whatever runs concurrently inside
flat_map_async. Operators run parents first (a merge after all of its inputs,
whose items it sees interleaved by input order) and siblings in the order they
were declared. A failure is charged to the input record it derives from: under
the `dlq` policy that record goes to the dead-letter sink with the error and
everything derived from it is dropped; under `fail` the record's task stops at
its first failing record, keeps only what came before it, and its checkpoint
stops there, while the pass's other tasks go on. flat_map_async's
task.max.concurrency holds per task.

Window operators are a slice's timer, so a pass with windows holds one task's
slice: they take their records once every input has been pushed (minus records
failed elsewhere), and the windows they close go on downstream after every
record-derived item, each under an index of its own past the slice
(`SliceResult.timers` says where it came from). A record late for a window is
dropped by that window only (`SliceResult.late`, for the dead letters, under
either policy: it is data, not a bug); other branches still process it.
"""

from __future__ import annotations

import asyncio
import bisect
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from elasticity.api.context import TaskContext
from elasticity.api.stream import KV, ApplicationDescriptor, Message, Node, OutputStream
from elasticity.api.window import WindowPane
from elasticity.jobmodel.model import SystemStreamPartition

_UNKNOWN: Any = object()
Item = tuple[int, Any]  # (index of the input record in the slice, or of a closed window past it; item derived from it)


@dataclass(frozen=True)
class Timer:
    """A window closed at the end of the slice: where its last record came from."""

    pane: WindowPane
    source: tuple[str, str, int, int]  # system, stream, partition, offset


@dataclass(kw_only=True)
class SliceResult:
    outputs: dict[OutputStream, list[tuple[int, Any, Any]]]  # (input index, key, value), in input order
    failures: dict[int, str]  # input index -> error
    stopped_at: int | None  # input index where the (first) task stopped (policy fail), else None
    process_ns: int = 0
    timers: dict[int, Timer] = field(default_factory=dict)  # index (>= the slice's length) -> closed window
    late: dict[int, list[str]] = field(default_factory=dict)  # input index -> why windows dropped it (one reason per window)
    stops: dict[int, int] = field(default_factory=dict)  # segment (virtual task) -> index where it stopped (policy fail)


@dataclass(kw_only=True)
class SliceExecutor:
    app: ApplicationDescriptor
    max_concurrency: int = 1
    callback_timeout_ms: int | None = None
    policy: str = "dlq"
    _failures: dict[int, str] = field(default_factory=dict, init=False)
    _late: dict[int, list[str]] = field(default_factory=dict, init=False)
    _messages: Sequence[Message] = field(default=(), init=False)
    _timers: dict[int, Timer] = field(default_factory=dict, init=False)
    _windows: dict[Node, list[Item]] = field(default_factory=dict, init=False)  # window node -> its records, until the timer
    _segments: list[int] = field(default_factory=list, init=False)  # where each virtual task's messages end

    def run(
        self, messages: Sequence[Message], failed: dict[int, str] | None = None, segments: Sequence[int] | None = None
    ) -> SliceResult:
        """`failed` holds records that failed before the graph (undecodable), by index. `segments`: where each
        virtual task's messages end, when one pass runs several tasks' slices (each stops, under the `fail`
        policy, and runs its async calls on its own); by default the messages are one task's."""
        start = time.perf_counter_ns()
        self._failures = dict(failed or {})
        self._late, self._messages, self._timers, self._windows = {}, messages, {}, {}
        self._segments = list(segments) if segments else [len(messages)]
        if len(self._segments) > 1 and self.app.windows:
            raise ValueError("a window's timer fires per virtual task: run one task's slice at a time")
        sinks: dict[OutputStream, list[Item]] = {}
        inbox: dict[Node, list[Item]] = {}
        nodes: dict[SystemStreamPartition, Node | None] = {}
        for i, m in enumerate(messages):
            if i in self._failures:
                continue
            node = nodes.get(m.ssp, _UNKNOWN)
            if node is _UNKNOWN:
                node = nodes[m.ssp] = self.app.inputs.get(m.ssp.system_stream)
            if node is not None:
                inbox.setdefault(node, []).append((i, m))
        self._flow(inbox, sinks)
        self._fire_windows(sinks)

        stops: dict[int, int] = {}
        if self.policy == "fail":
            for i in sorted(self._failures):
                stops.setdefault(self._segment(i), i)
        outputs = {}
        for out, items in sinks.items():
            kept = [(i, x) for i, x in items if i not in self._failures and not (stops and self._stopped(i, stops))]
            kept.sort(key=lambda ix: ix[0])  # stable: items of one input keep their order
            outputs[out] = [(i, *self._key_value(self._origin(i), x)) for i, x in kept]
        return SliceResult(
            outputs=outputs,
            failures=dict(self._failures),
            stopped_at=min(stops.values(), default=None),
            process_ns=time.perf_counter_ns() - start,
            timers=dict(self._timers),
            late={i: r for i, r in self._late.items() if i not in self._failures},
            stops=stops,
        )

    def _segment(self, index: int) -> int:
        """The virtual task (segment) of a message index; a closed window's is the last (one task per pass)."""
        return min(bisect.bisect_right(self._segments, index), len(self._segments) - 1)

    def _stopped(self, index: int, stops: dict[int, int]) -> bool:
        stop = stops.get(self._segment(index))
        return stop is not None and index >= stop

    def _origin(self, index: int) -> Message | WindowPane:
        return self._messages[index] if index < len(self._messages) else self._timers[index].pane

    @staticmethod
    def _key_value(origin: Message | WindowPane, item: Any) -> tuple[Any, Any]:
        if isinstance(item, KV | Message):
            return item.key, item.value
        if isinstance(item, WindowPane):
            return item.key, item.as_dict()
        return origin.key, item

    def _context(self) -> TaskContext:
        context = next((m.context for m in self._messages if m.context is not None), None)
        if context is None:
            raise RuntimeError("a window or join needs the virtual task's context (stores, tables): none was given")
        return context

    def _flow(self, inbox: dict[Node, list[Item]], sinks: dict[OutputStream, list[Item]]) -> None:
        """Runs the nodes reachable from the inbox's, each after all of its parents."""
        for node in _parents_first(list(inbox)):
            items = inbox.pop(node, [])
            items.sort(key=lambda ix: ix[0])  # stable: a merge's inputs interleave by input order
            out = items if node.op == "input" else self._apply(node, items, sinks)
            for child in node.children:
                inbox.setdefault(child, []).extend(out)

    def _fail(self, index: int, node: Node, e: BaseException) -> None:
        self._failures.setdefault(index, f"{node.name}: {type(e).__name__}: {e}")

    def _apply(self, node: Node, items: list[Item], sinks: dict[OutputStream, list[Item]]) -> list[Item]:
        """The node's output items; records that failed anywhere before it are not passed in."""
        items = [ix for ix in items if ix[0] not in self._failures]
        if not items:
            return []
        if node.op == "send_to":
            assert node.output is not None
            sinks.setdefault(node.output, []).extend(items)
            return []
        if node.op == "merge":
            return items
        if node.op == "window":  # the slice's timer fires it (_fire_windows)
            self._windows.setdefault(node, []).extend(items)
            return []
        if node.op == "join":
            return self._join(node, items)
        if node.op == "flat_map_async":
            out = asyncio.run(self._run_async(node, items))
        else:
            out = []
            fn = node.fn
            assert fn is not None
            for i, item in items:
                try:
                    if node.op == "map":
                        out.append((i, fn(item)))
                    elif node.op == "filter":
                        if fn(item):
                            out.append((i, item))
                    else:  # flat_map
                        out.extend((i, r) for r in fn(item))
                except Exception as e:  # noqa: BLE001 - user code: charged to its record
                    self._fail(i, node, e)
        return out

    def _join(self, node: Node, items: list[Item]) -> list[Item]:
        """Stream-table join: each item's key looked up in the table; inner drops a miss, left passes None."""
        spec = node.join
        assert spec is not None
        table = self._context().table(spec.table)
        out = []
        for i, item in items:
            try:
                key = spec.key_fn(item) if spec.key_fn else self._key_value(self._origin(i), item)[0]
                record = None if key is None else table.get(key)
                if record is not None or spec.kind == "left":
                    out.append((i, spec.fn(item, record)))
            except Exception as e:  # noqa: BLE001 - user code: charged to its record
                self._fail(i, node, e)
        return out

    def _fire_windows(self, sinks: dict[OutputStream, list[Item]]) -> None:
        """The end of the slice: each window takes its records in input order, then sends on the
        windows the new watermark closed (which may feed further windows)."""
        while self._windows:
            node = next(iter(self._windows))
            items = sorted((ix for ix in self._windows.pop(node) if ix[0] not in self._failures), key=lambda ix: ix[0])
            assert node.window is not None
            store = self._context().store(node.name)
            fed = []
            for i, item in items:
                origin = self._origin(i)
                try:
                    key = node.window.window.key_fn(item)
                except Exception as e:  # noqa: BLE001 - user code: charged to its record
                    self._fail(i, node, e)
                    continue
                if isinstance(origin, Message):
                    fed.append(
                        (
                            i,
                            item,
                            key,
                            origin.timestamp,
                            [origin.ssp.system, origin.ssp.stream, origin.ssp.partition, origin.offset],
                        )
                    )
                else:  # a closed window of an earlier window: its time is its last ms
                    fed.append((i, item, key, origin.end - 1, list(self._timers[i].source)))
            run = node.window.run(store, fed)
            for i, err in run.failed.items():
                self._fail(i, node, err)
            for i, reason in run.late.items():
                self._late.setdefault(i, []).append(reason)
            fired = []
            for c in run.closed:
                index = len(self._messages) + len(self._timers)
                system, stream, partition, offset = c.source
                self._timers[index] = Timer(c.pane, (system, stream, partition, offset))
                fired.append((index, c.pane))
            if fired:
                self._flow({child: list(fired) for child in node.children}, sinks)

    async def _run_async(self, node: Node, items: list[Item]) -> list[Item]:
        """At most task.max.concurrency calls in flight per virtual task: that many runners take each task's
        items in input order (not a task and a semaphore per item: those cost more than the call itself for a
        fast one); outputs keep it."""
        timeout = self.callback_timeout_ms / 1000 if self.callback_timeout_ms else None
        fn = node.fn
        assert fn is not None
        done: list[list[Item]] = [[] for _ in items]

        async def runner(queue: Iterator[tuple[int, Item]]) -> None:
            for n, (i, item) in queue:  # the shared iterator hands each item to one runner
                try:
                    results = await (fn(item) if timeout is None else asyncio.wait_for(fn(item), timeout))
                    done[n] = [(i, r) for r in results]
                except TimeoutError:
                    self._failures.setdefault(
                        i, f"{node.name}: timed out after task.callback.timeout.ms={self.callback_timeout_ms}"
                    )
                except Exception as e:  # noqa: BLE001 - user code: charged to its record
                    self._fail(i, node, e)

        per_task: dict[int, list[tuple[int, Item]]] = {}
        for n, ix in enumerate(items):
            per_task.setdefault(self._segment(ix[0]), []).append((n, ix))
        runners = []
        for task_items in per_task.values():
            queue = iter(task_items)
            runners += [runner(queue) for _ in range(min(max(1, self.max_concurrency), len(task_items)))]
        await (runners[0] if len(runners) == 1 else asyncio.gather(*runners))
        return [ix for part in done for ix in part]


def _parents_first(roots: Iterable[Node]) -> list[Node]:
    """Every node reachable from `roots` after all of its parents; siblings in declaration order."""
    seen: set[Node] = set()
    post: list[Node] = []

    def visit(node: Node) -> None:
        if node in seen:
            return
        seen.add(node)
        for child in reversed(node.children):
            visit(child)
        post.append(node)

    for root in reversed(list(roots)):
        visit(root)
    return post[::-1]
