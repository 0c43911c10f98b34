"""Hypothesis strategies for configs and partition layouts."""

from __future__ import annotations

from hypothesis import strategies as st

from elasticity.config import JobConfig, validate
from elasticity.jobmodel.grouping import Grouper, PartitionScheme
from elasticity.jobmodel.model import SystemStream

names = st.from_regex(r"[a-z][a-z0-9_\-]{0,8}", fullmatch=True)
# a dotted stream never ends in a number: Samza's SSP keys (`system.stream.partition[.keyBucket]`) could not tell
streams = st.from_regex(r"[a-z][a-z0-9_\-]{0,8}(\.[a-z][a-z0-9]{0,3})?", fullmatch=True)


@st.composite
def job_layouts(draw, max_streams: int = 3, max_partitions: int = 12, max_factor: int = 16):
    """A valid JobConfig (any grouper and scheme) and partition counts for its inputs."""
    system = draw(names)
    inputs = draw(st.lists(streams, min_size=1, max_size=max_streams, unique=True))
    grouper = draw(st.sampled_from(list(Grouper)))
    props = {"job.name": "j", "task.inputs": ",".join(f"{system}.{s}" for s in inputs)}
    props["job.systemstreampartition.grouper.factory"] = grouper.value
    if grouper is Grouper.GROUP_BY_PARTITION:
        scheme = draw(st.none() | st.sampled_from(list(PartitionScheme)))
        if scheme is not None:
            props["task.partition.scheme"] = scheme.value
    factor = 1 if grouper is Grouper.ALL_SSP_TO_SINGLE_TASK else draw(st.integers(1, max_factor))
    props["job.elasticity.factor"] = str(factor)
    counts = {SystemStream(system, s): draw(st.integers(1, max_partitions)) for s in inputs}
    config: JobConfig = validate(props)
    return config, counts
