"""Demo input: keyed JSON records with a per-key sequence number, so that order
can be checked downstream; a few null keys and a hot key, as real feeds have."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator


def demo_records(
    count: int, keys: int, seed: int = 7, *, null_key_every: int = 50, hot_key_share: float = 0.1
) -> Iterator[tuple[bytes | None, bytes]]:
    rng = random.Random(seed)
    seq: dict[str | None, int] = {}
    for i in range(count):
        if null_key_every and i % null_key_every == null_key_every - 1:
            key = None
        elif rng.random() < hot_key_share:
            key = "user-0"  # hot key
        else:
            key = f"user-{rng.randrange(keys)}"
        seq[key] = seq.get(key, -1) + 1
        value = {"key": key, "seq": seq[key], "amount": round(rng.uniform(1, 500), 2)}
        yield (None if key is None else key.encode()), json.dumps(value).encode()
