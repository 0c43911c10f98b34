"""The default application: every input record, unchanged, to `parquet.output`."""

from elasticity.api import ApplicationDescriptor


def build(app: ApplicationDescriptor) -> None:
    out = app.output("parquet.output")
    for stream in app.job_inputs:
        app.input(stream).send_to(out)
