"""The default application: every input record, unchanged, to `parquet.output`; or, `build_kafka`, to the
Kafka topic `<input>-copy` (a job copying a topic, as the exactly-once benchmark runs)."""

from elasticity.api import ApplicationDescriptor


def build(app: ApplicationDescriptor) -> None:
    out = app.output("parquet.output")
    for stream in app.job_inputs:
        app.input(stream).send_to(out)


def build_kafka(app: ApplicationDescriptor) -> None:
    for stream in app.job_inputs:
        app.input(stream).send_to(f"{stream.system}.{stream.stream}-copy")
