"""A time schedule of factors (`job.elasticity.schedule`: `<cron> -> <factor>; ...`): at any time,
the factor of the rule that fired last. Pure, applied through the ordinary rescale path."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from croniter import croniter


@dataclass(frozen=True)
class ScheduleRule:
    cron: str
    factor: int


def parse_schedule(text: str) -> tuple[ScheduleRule, ...]:
    """`<cron> -> <factor>; ...`, e.g. `0 8 * * * -> 8; 0 20 * * * -> 2` (8 by day, 2 by night)."""
    rules = []
    for part in filter(None, (p.strip() for p in text.split(";"))):
        cron, sep, factor = part.rpartition("->")
        if not sep or not croniter.is_valid(cron.strip()) or not factor.strip().isdigit() or int(factor) < 1:
            raise ValueError(f"schedule rule {part!r}: expected '<cron expression> -> <factor>'")
        rules.append(ScheduleRule(cron.strip(), int(factor)))
    if not rules:
        raise ValueError("a schedule needs at least one '<cron> -> <factor>' rule")
    return tuple(rules)


def scheduled_factor(rules: Sequence[ScheduleRule], now: datetime) -> int:
    """The factor of the rule that fired last before `now`."""
    return max(rules, key=lambda r: croniter(r.cron, now).get_prev(datetime)).factor
