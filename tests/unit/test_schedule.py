from datetime import datetime

import pytest

from elasticity.scaling.schedule import parse_schedule, scheduled_factor


def test_schedule_rules():
    rules = parse_schedule("0 8 * * * -> 8; 0 20 * * * -> 2")
    assert scheduled_factor(rules, datetime(2026, 11, 21, 9, 30)) == 8
    assert scheduled_factor(rules, datetime(2026, 11, 21, 21, 0)) == 2
    assert scheduled_factor(rules, datetime(2026, 11, 21, 3, 0)) == 2  # still last night's rule
    with pytest.raises(ValueError, match="cron expression"):
        parse_schedule("every morning -> 8")


@pytest.mark.parametrize("text", ["0 8 * * * -> 0", "0 8 * * * -> -2", "0 8 * * * -> 2; 0 20 * * * -> 0", "0 8 * * * ->"])
def test_a_schedule_to_factor_0_or_below_is_rejected(text):
    with pytest.raises(ValueError, match="expected '<cron expression> -> <factor>'"):
        parse_schedule(text)
