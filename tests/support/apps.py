"""Applications used by the engine tests (importable by Spark's Python workers)."""

from elasticity.api import KV, ApplicationDescriptor


def relay(app: ApplicationDescriptor) -> None:
    """Every input record to the Kafka topic `<input>-relay`, keyed as it came."""
    for s in app.job_inputs:
        app.input(s).map(lambda m: KV(m.key, {"offset": m.offset, "partition": m.ssp.partition, **m.value})).send_to(
            f"kafka.{s.stream}-relay"
        )


def padded(app: ApplicationDescriptor) -> None:
    """Every input record to `parquet.out` and to the Kafka topic `<input>-out`, where a record's `pad` (a number)
    becomes that many bytes of its value: an output the topic's max.message.bytes can refuse."""

    def pad(m):
        return {**m.value, "pad": "x" * int(m.value.get("pad", 0))}

    for s in app.job_inputs:
        records = app.input(s)
        records.send_to("parquet.out")
        records.map(pad).send_to(f"kafka.{s.stream}-out")


def broken(app: ApplicationDescriptor) -> None:
    """Fails on every third record: for task.dead.letter.policy=fail."""

    def check(m):
        if m.offset % 3 == 2:
            raise RuntimeError(f"cannot handle offset {m.offset}")
        return m.value

    for s in app.job_inputs:
        app.input(s).map(check).send_to("parquet.out")


def aggregates(app: ApplicationDescriptor) -> None:
    """Declares the store `aggs` (input key bytes -> {count, sum}) that tests/support/memory.py's StatefulRunner
    keeps per virtual task; the runner applies the records itself."""
    from elasticity.api import StoreDescriptor

    app.store(StoreDescriptor("aggs", "byte", "json"))
    for s in app.job_inputs:
        app.input(s).send_to("parquet.out")


def sessions_with_joined_clicks(app: ApplicationDescriptor) -> None:
    """elasticity.apps.sessions:build, plus every click as the same stream-table join gave it, to
    `parquet.joined`: the tier each click saw, which a session's value shows only for its last click."""
    from elasticity.apps import sessions

    sessions.build(app)
    for s in app.job_inputs:
        app.input(s).filter(lambda m: m.key is not None).join(sessions.USERS, sessions.with_profile, kind="left").send_to(
            "parquet.joined"
        )
