"""What the checkpoint store refuses, and why."""

from __future__ import annotations


class StoreError(RuntimeError):
    pass


class StaleGenerationError(StoreError):
    """A writer planned under a generation that is no longer current."""


class LeaseHeldError(StoreError):
    pass


class BatchStateError(StoreError):
    pass


class PendingBatchError(StoreError):
    pass
