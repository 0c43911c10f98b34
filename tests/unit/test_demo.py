import json

from elasticity.apps.demo_feed import demo_records


def test_demo_records_are_deterministic_keyed_and_sequenced():
    records = list(demo_records(500, keys=10, seed=1))
    assert records == list(demo_records(500, keys=10, seed=1))
    assert any(k is None for k, _ in records)
    last: dict = {}
    for key, value in records:
        v = json.loads(value)
        assert v["key"] == (None if key is None else key.decode())
        assert v["seq"] == last.get(key, -1) + 1  # per-key sequence lets order be checked downstream
        last[key] = v["seq"]
