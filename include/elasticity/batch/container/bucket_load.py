"""The busiest key bucket at factors the job does not run at: what the autosizer sizes a job against (per-key
order, `scaling.ds2.share`), measured rather than modelled.

A key bucket at factor F is pmod(hash, F) of a partition (SEP-32), and the routing hashes every record it reads
anyway, so counting each weighed factor's buckets costs a `%` per record and factor, and no second read. The
grouper's task at factor F holds a partition's bucket (GroupByPartition: the same partition of each input
stream), so the busiest bucket is counted per partition number. Each slot reads the whole range of every
partition it reads, so the busiest over the slots is the batch's (a partition read by two slots counts twice
into a max, which does not change it)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np


@dataclass
class BucketLoad:
    """Per partition and weighed factor, the records of each key bucket read so far: a bincount per factor,
    which adds under half the routing's own time (a Counter per factor tripled it)."""

    factors: tuple[int, ...]
    counts: dict[tuple[int, int], np.ndarray] = field(default_factory=dict)  # (partition, factor) -> records per bucket

    def add(self, partition: int, hashes: Sequence[int]) -> None:
        if not hashes:
            return
        h = np.fromiter(hashes, dtype=np.int64, count=len(hashes))
        for f in self.factors:
            buckets = np.bincount(h % f, minlength=f)  # numpy's % is pmod for f > 0, as Python's
            seen = self.counts.get((partition, f))
            self.counts[(partition, f)] = buckets if seen is None else seen + buckets

    def busiest(self) -> dict[int, int]:
        """Per weighed factor, the records of its busiest key bucket of any partition."""
        out = dict.fromkeys(self.factors, 0)
        for (_, f), buckets in self.counts.items():
            out[f] = max(out[f], int(buckets.max()))
        return out


def busiest_of(slots: Iterable[Mapping[int, int]]) -> dict[int, int]:
    """The batch's busiest key bucket per factor, from each slot's."""
    out: dict[int, int] = {}
    for slot in slots:
        for f, n in slot.items():
            out[f] = max(out.get(f, 0), n)
    return out
