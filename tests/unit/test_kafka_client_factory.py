"""Every Kafka client is made in `elasticity.kafka.clients`, where its library is chosen: no other module of the
library calls a client's constructor (under its own name, an alias or through its module). Read from the source
(ast), like the architecture test."""

from __future__ import annotations

import ast

from tests.support.library import library_modules

FACTORY = "elasticity.kafka.clients"
CONSTRUCTORS = {
    "Consumer",
    "Producer",
    "AdminClient",
    "DeserializingConsumer",
    "SerializingProducer",
    "KafkaConsumer",
    "KafkaProducer",
    "KafkaAdminClient",
}
LIBRARIES = ("confluent_kafka", "kafka")


def constructions(source: str) -> list[tuple[int, str]]:
    """(line, name) of each call of a Kafka client's constructor in `source`."""
    tree = ast.parse(source)
    names = set(CONSTRUCTORS)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in LIBRARIES:
            names |= {a.asname or a.name for a in node.names if a.name in CONSTRUCTORS}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if name in names or (isinstance(f, ast.Attribute) and f.attr in CONSTRUCTORS):
                found.append((node.lineno, name or ""))
    return sorted(found)


def test_only_the_factory_makes_kafka_clients():
    made = {name: constructions(path.read_text()) for name, path in library_modules().items()}
    elsewhere = {name: calls for name, calls in made.items() if calls and name != FACTORY}
    assert not elsewhere, f"Kafka clients made outside {FACTORY} (make them there): {elsewhere}"
    assert {n for _, n in made[FACTORY]} >= {"Consumer", "Producer", "KafkaConsumer", "KafkaProducer", "KafkaAdminClient"}


def test_a_constructor_is_seen_under_an_alias_and_through_its_module():
    source = (
        "import confluent_kafka\nfrom kafka import KafkaProducer as P\n"
        "confluent_kafka.Consumer({})\nP(bootstrap_servers='h:1')\nprint(P)\n"
    )
    assert constructions(source) == [(3, "Consumer"), (4, "P")]
