"""A job's versions, as data quality counts them: the batches between two replays.

A replay (a generation of origin `replay`, `elasticity.checkpoint.replay`) starts a new version of the job's
results: the replayed range's records are processed, audited and output once more, on purpose. So the checks
hold within a version: every record once per version, in order per key from the version's start, the stores
equal to what the version's processed records give from empty. A batch's version is the latest replay
generation at or below its own generation (0: before any replay).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from elasticity.checkpoint.batch_plan import BatchPlan
from elasticity.checkpoint.replay import Replay
from elasticity.checkpoint.store import CheckpointStore


@dataclass(frozen=True)
class Versions:
    """The job's replays by generation number."""

    replays: Mapping[int, Replay]

    @classmethod
    def of(cls, store: CheckpointStore, job: str) -> Versions:
        return cls({g.number: Replay.from_json(g.replay) for g in store.generations(job) if g.origin == "replay" and g.replay})

    def of_generation(self, generation: int) -> int:
        return max((r for r in self.replays if r <= generation), default=0)

    def of_batch(self, plan: BatchPlan) -> int:
        return self.of_generation(plan.generation)

    def first_segment(self, plans: Sequence[BatchPlan]) -> tuple[list[BatchPlan], int | None]:
        """The plans (in batch order) of the first version among them, and the replay that ended that version
        (None: they are all of one version)."""
        if not plans:
            return [], None
        first = self.of_batch(plans[0])
        segment = [p for p in plans if self.of_batch(p) == first]
        if len(segment) == len(plans):
            return segment, None
        return segment, min(r for r in self.replays if r > first)
