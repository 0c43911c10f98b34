"""Runs one virtual task's slice through the application's operator graph.

Operator-at-a-time over the slice: each operator sees the slice's items in
input order, so outputs keep that order (per key, too) whatever runs
concurrently inside flat_map_async. Operators run parents first (a merge after
all of its inputs, whose items it sees interleaved by input order) and siblings
in the order they were declared. A failure is charged to the input record it
derives from: under the `dlq` policy that record goes to the dead-letter sink
with the error and everything derived from it is dropped; under `fail` the task
stops at the first failing record, keeps only what came before it, and its
checkpoint stops there.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .stream import KV, ApplicationDescriptor, Message, Node, OutputStream

Item = tuple[int, Any]  # (index of the input record in the slice, item derived from it)


@dataclass
class SliceResult:
    outputs: dict[OutputStream, list[tuple[int, Any, Any]]]  # (input index, key, value), in input order
    failures: dict[int, str]  # input index -> error
    stopped_at: int | None  # input index where the task stopped (policy fail), else None
    process_ns: int = 0


@dataclass
class SliceExecutor:
    app: ApplicationDescriptor
    max_concurrency: int = 1
    callback_timeout_ms: int | None = None
    policy: str = "dlq"
    _failures: dict[int, str] = field(default_factory=dict, init=False)

    def run(self, messages: Sequence[Message], failed: dict[int, str] | None = None) -> SliceResult:
        """`failed` holds records that failed before the graph (undecodable), by index."""
        start = time.perf_counter_ns()
        self._failures = dict(failed or {})
        sinks: dict[OutputStream, list[Item]] = {}
        inbox: dict[Node, list[Item]] = {}
        for i, m in enumerate(messages):
            if i in self._failures:
                continue
            node = self.app.inputs.get(m.ssp.system_stream)
            if node is not None:
                inbox.setdefault(node, []).append((i, m))
        for node in _parents_first(self.app.inputs.values()):
            items = inbox.pop(node, [])
            items.sort(key=lambda ix: ix[0])  # stable: a merge's inputs interleave by input order
            out = items if node.op == "input" else self._apply(node, items, sinks)
            for child in node.children:
                inbox.setdefault(child, []).extend(out)

        stopped_at = min(self._failures) if self.policy == "fail" and self._failures else None
        outputs = {}
        for out, items in sinks.items():
            kept = [(i, x) for i, x in items if i not in self._failures and (stopped_at is None or i < stopped_at)]
            kept.sort(key=lambda ix: ix[0])  # stable: items of one input keep their order
            outputs[out] = [(i, *self._key_value(messages[i], x)) for i, x in kept]
        return SliceResult(outputs, dict(self._failures), stopped_at, time.perf_counter_ns() - start)

    @staticmethod
    def _key_value(origin: Message, item: Any) -> tuple[Any, Any]:
        if isinstance(item, KV):
            return item.key, item.value
        if isinstance(item, Message):
            return item.key, item.value
        return origin.key, item

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

    async def _run_async(self, node: Node, items: list[Item]) -> list[Item]:
        gate = asyncio.Semaphore(max(1, self.max_concurrency))
        timeout = self.callback_timeout_ms / 1000 if self.callback_timeout_ms else None
        assert node.fn is not None

        async def one(i: int, item: Any) -> list[Item]:
            async with gate:
                try:
                    results = await asyncio.wait_for(node.fn(item), timeout)
                    return [(i, r) for r in results]
                except TimeoutError:
                    self._failures.setdefault(i, f"{node.name}: timed out after task.callback.timeout.ms={self.callback_timeout_ms}")
                except Exception as e:  # noqa: BLE001 - user code: charged to its record
                    self._fail(i, node, e)
                return []

        done = await asyncio.gather(*(one(i, item) for i, item in items))
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
