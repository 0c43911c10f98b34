"""The lease owner of one attempt: its run, its try and a random part, so that no two attempts share one.

A retry of an Airflow task, a Celery task the scheduler gave up on, a CLI run started twice: each takes the
job's lease under a token of its own, so the store tells them apart (the lease's epoch moves when the lease
passes from one to the other) and an earlier attempt still alive is fenced from what its successor writes.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

SEPARATOR = "#"


@dataclass(frozen=True)
class AttemptToken:
    run: str  # the DAG run id, or what names a run outside Airflow (the CLI's `--owner`)
    try_number: int | None  # Airflow's try number; None outside Airflow
    nonce: str  # 8 hex digits: two attempts of one try (a task the scheduler lost and ran again) still differ

    @classmethod
    def new(cls, run: str, try_number: int | None = None) -> AttemptToken:
        return cls(run, try_number, secrets.token_hex(4))

    def __str__(self) -> str:
        parts = (self.run, *(() if self.try_number is None else (str(self.try_number),)), self.nonce)
        return SEPARATOR.join(parts)

    @classmethod
    def parse(cls, owner: str) -> AttemptToken:
        """The token an owner string was made from (a run id may hold the separator: it is split from the right)."""
        head, _, nonce = owner.rpartition(SEPARATOR)
        run, _, tried = head.rpartition(SEPARATOR)
        if not head or len(nonce) != 8:
            raise ValueError(f"{owner!r} is not an attempt token (<run>#<try>#<8 hex>)")
        if run and tried.isdigit():
            return cls(run, int(tried), nonce)
        return cls(head, None, nonce)


def attempt_owner(run: str, try_number: int | None = None) -> str:
    """A new attempt's lease owner, `<run>#<try>#<8 hex>` (`<run>#<8 hex>` without a try number)."""
    return str(AttemptToken.new(run, try_number))


def supersedes(owner: str, holder: str) -> bool:
    """Whether `owner` may take the lease from `holder` before it expires: a later try of the same Airflow run.
    Airflow starts try N+1 only once try N ended or was declared lost (its heartbeat timed out), so its lease
    is a dead attempt's, or a zombie's the fencing refuses from then on; waiting out its TTL would only delay the
    retry (by up to `job.lease.ttl.ms`)."""
    try:
        mine, theirs = AttemptToken.parse(owner), AttemptToken.parse(holder)
    except ValueError:
        return False
    return (
        mine.run == theirs.run
        and mine.try_number is not None
        and theirs.try_number is not None
        and theirs.try_number < mine.try_number
    )
