"""The json serde runs on orjson with the standard library as its reference: it must read exactly what `json`
reads (the same values, the same records refused) and write what `json` reads back as the same value."""

from __future__ import annotations

import json
import math

from hypothesis import example, given
from hypothesis import strategies as st

from elasticity.serializers import RecordSerdeError, deserialize, serialize

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text()
values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4), max_leaves=12
)


def same(a, b) -> bool:
    """Equal, NaN equal to NaN, and of the same types (1 and 1.0, True and 1 differ)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


def stdlib(raw: bytes):
    try:
        return json.loads(raw), None
    except (UnicodeDecodeError, ValueError) as e:
        return None, e


@given(values.filter(lambda v: v is not None))  # a None value is no record (serialize gives None)
@example(float("nan"))
@example({"x": float("inf"), "y": None})
@example(2**70)
@example({"big": -(2**64), "n": [1e16, 1e-7]})
def test_what_it_writes_reads_back_as_the_same_value_with_the_standard_library(v):
    out = serialize("json", v)
    assert same(json.loads(out), v)
    assert same(deserialize("json", out, "value"), v)


@given(values)
def test_it_reads_whatever_the_standard_library_writes_as_the_standard_library_does(v):
    raw = json.dumps(v).encode()
    assert same(deserialize("json", raw, "value"), json.loads(raw))


@given(st.binary(max_size=40) | values.map(lambda v: json.dumps(v).encode()[:-1]))
@example(b"NaN")
@example(b"123456789012345678901234567890")
@example('{"a": 1}'.encode("utf-16"))
@example(b'{"a": 1, "a": 2}')
@example(b"\xff")
@example(b" ")
def test_it_accepts_and_refuses_exactly_what_the_standard_library_does(raw):
    expected, error = stdlib(raw)
    if error is None:
        assert same(deserialize("json", raw, "value"), expected)
    else:
        try:
            deserialize("json", raw, "value")
        except RecordSerdeError as e:
            assert "value is not valid json" in str(e)
        else:
            raise AssertionError(f"{raw!r} decoded, the standard library refuses it: {error}")


def test_keys_and_values_it_cannot_write_natively_are_written_as_json_writes_them():
    import datetime

    when = datetime.datetime(2026, 11, 26, 5, 0)
    assert serialize("json", {"at": when, 2: "two"}) == b'{"2":"two","at":"2026-11-26 05:00:00"}'
    assert serialize("json", {"b": 1, "a": 2}) == b'{"a":2,"b":1}'
