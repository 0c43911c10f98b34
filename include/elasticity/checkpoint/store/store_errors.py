"""What the checkpoint store refuses, and why."""

from __future__ import annotations

from typing import Any


class StoreError(RuntimeError):
    pass


class StaleGenerationError(StoreError):
    """A writer planned under a generation that is no longer current."""


class LeaseHeldError(StoreError):
    pass


class SupersededError(LeaseHeldError):
    """Another attempt took the job's lease after this one: this attempt may write nothing any more, even once
    that attempt's lease expired or was released (a retry is a new attempt, with a new token)."""

    def __init__(self, message: str, *, owner: str, epoch: int, superseded_by: str | None, current_epoch: int | None) -> None:
        super().__init__(message)
        self.owner, self.epoch = owner, epoch
        self.superseded_by, self.current_epoch = superseded_by, current_epoch

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled whole (a Spark task's error travels to the driver)."""
        fields = {
            "owner": self.owner,
            "epoch": self.epoch,
            "superseded_by": self.superseded_by,
            "current_epoch": self.current_epoch,
        }
        return (_superseded, (str(self), fields))


def _superseded(message: str, fields: dict[str, Any]) -> SupersededError:
    return SupersededError(message, **fields)


class BatchStateError(StoreError):
    pass


class PendingBatchError(StoreError):
    pass
