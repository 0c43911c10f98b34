"""What the checkpoint store refuses, and why."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class StoreError(RuntimeError):
    pass


class StoreUnavailable(StoreError):
    """The store's server went away mid-run (a restart, a failover, the network): the step is not committed
    unless its commit went through before the connection broke; the next attempt reads which it was."""


class CorruptRowError(StoreError):
    """A stored row that does not decode (edited by hand, cut short, written by something else)."""


@contextmanager
def decoding(what: str) -> Iterator[None]:
    """Decoding `what` (a row named by its keys): what does not decode is named, never a bare JSONDecodeError."""
    try:
        yield
    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as e:
        raise CorruptRowError(f"{what} does not decode ({type(e).__name__}: {e}); fix or delete that row") from e


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
