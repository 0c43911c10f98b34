"""Where a Samza config means something else here, said at load.

Samza's reporter factories load (a Samza config must) but are not run: a warning
names each. In strict mode (`job.config.strict=true`, `--strict`) every
deliberate difference from Samza that the config touches is warned about too,
so that a team moving a job between the two sees them before the data does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from elasticity.config.parsers import NOT_RUN_REPORTERS, REPORTER_CLASSES

DEFAULT_THREAD_POOL_SIZE = 256
"""job.container.thread.pool.size when unset. Samza's 0 runs a container's virtual tasks one after another, so a
synchronous app set to a higher factor gained nothing (92 vs 91 records/s at factor 2 and 8 on a 20 ms lookup);
a pool lets them wait side by side. 256, not 64: factor 64 on 4 partitions puts 256 virtual tasks in a slot
(bench/vtask_bench.py compares the two). A slot starts no more threads than it has virtual tasks with records,
and reuses a thread whose slice is done."""


def idle_factor(values: Mapping[str, Any]) -> list[str]:
    """A warning when the factor cannot pay: more virtual tasks, but a container runs them one after another."""
    factor, pool = values["job.elasticity.factor"], values["job.container.thread.pool.size"]
    if factor > 1 and pool <= 1:
        return [
            f"job.container.thread.pool.size={pool} with job.elasticity.factor={factor}: a container runs its virtual "
            f"tasks one after another, so the factor adds tasks but no concurrency (only task.max.concurrency within "
            f"a task); unset job.container.thread.pool.size (default {DEFAULT_THREAD_POOL_SIZE}) or set it to at "
            f"least {factor}"
        ]
    return []


def not_run_reporters(props: Mapping[str, str]) -> list[str]:
    """A warning per reporter whose class is one of Samza's, which need a JVM."""
    named = {n.strip() for n in props.get("metrics.reporters", "").split(",") if n.strip()}
    out = []
    for name, text in sorted(props.items()):
        m = re.fullmatch(r"metrics\.reporter\.([^.]+)\.class", name)
        kind = REPORTER_CLASSES.get(text.strip()) if m else None
        if m and kind in NOT_RUN_REPORTERS and (not named or m.group(1) in named):
            out.append(
                f"{name}={text.strip()}: {NOT_RUN_REPORTERS[kind]} is not run here; the job's metrics go to the "
                "checkpoint store (the job page) and to StatsD reporters (metrics.reporter.<name>.class=statsd)"
            )
    return out


def differences(values: Mapping[str, Any], props: Mapping[str, str]) -> list[str]:
    """What this config does differently from the same config under Samza, on purpose (README: Samza compatibility)."""
    out = []
    factor = values["job.elasticity.factor"]
    if factor > 1:
        out.append(
            f"job.elasticity.factor={factor}: a key's bucket is pmod(xxhash64(key bytes, seed 42), F), not Samza's "
            "abs(key.hashCode()) % F (stable across processes and independent of Kafka's partitioner), and task names "
            "carry the factor (Partition_<p>-<bucket>-<F>, not Samza's 'Partition <p> <bucket>'): checkpoints at this "
            "factor do not line up with a Samza job's; export merges them to factor 1"
        )
    if "job.container.thread.pool.size" not in props:
        out.append(
            f"job.container.thread.pool.size unset: {DEFAULT_THREAD_POOL_SIZE} threads run a container's virtual tasks "
            "side by side; Samza's default 0 runs them one after another (set 0 for Samza's behaviour)"
        )
    for ss in values["task.inputs"] or ():
        unset = [w for w in ("key", "msg") if f"systems.{ss.system}.samza.{w}.serde" not in props]
        if unset:
            out.append(
                f"systems.{ss.system}.samza.{'/'.join(unset)}.serde unset: read here as "
                f"{' and '.join({'key': 'string keys', 'msg': 'JSON messages'}[w] for w in unset)}; Samza without a "
                "serde hands the bytes over as they are"
            )
    for name in sorted(props):
        if m := re.fullmatch(r"systems\.([^.]+)\.default\.stream\.offset\.default", name):
            out.append(
                f"{name}: this product's own name, which Samza does not read; Samza's is "
                f"systems.{m.group(1)}.default.stream.samza.offset.default"
            )
    stores = {n.split(".")[1] for n in props if re.fullmatch(r"stores\.[^.]+\.(backup\.factories|changelog)", n)}
    for store in sorted(stores):
        restore = {f"stores.{store}.restore.factories", f"stores.{store}.restore.factory", "stores.restore.factories"}
        if f"stores.{store}.changelog" not in props and not restore & set(props):
            out.append(
                f"store {store!r} has no changelog and no restore factories: Samza would restore nothing into it; "
                "here it restores from its backup factories"
            )
    return out
