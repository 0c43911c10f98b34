"""Job configuration: flat Samza-style `.properties`, validated in this one place.

Every key the product reads is declared once (`job.py`: a `JobConfig` field per
job-level key, declared by concern in its `*_keys.py` bases; `keys.py`: the keys with a `<part>` in their name) with its parser,
default and doc; a bad value fails at load naming the key, the value and the
allowed values. An unknown key is warned about with the nearest known key ("did
you mean"), and is an error in strict mode (`job.config.strict=true`, or
`--strict` on the command line): a typo must not pass silently. Cross-key rules
live in `rules.py`, each with why it holds; the rules on what a config cannot hold
itself (the app's declarations, the Spark master a run resolves, a rescale's
factor, the deployment's settings) in `runtime_rules.py`, checked once those are known.
"""

from elasticity.config.errors import ConfigError, ConfigWarning
from elasticity.config.home import elasticity_home
from elasticity.config.job import FIELD_KEYS, KEYS, JobConfig, did_you_mean, find_key, key_value, load_config, validate
from elasticity.config.keys import MAX_ELASTICITY_FACTOR, REPORTER_KEYS, STORE_KEYS, SYSTEM_KEYS, Key, key
from elasticity.config.parsers import (
    BLOB_STORE_FACTORY,
    KAFKA_CHANGELOG_FACTORY,
    REPORTER_CLASSES,
    STATE_BACKEND_FACTORIES,
    STORE_BACKENDS,
    Parser,
    parse_factories,
    parse_side_inputs,
    store_url,
)
from elasticity.config.properties import parse_properties
from elasticity.config.rules import RULES
from elasticity.jobmodel.grouping import Grouper, PartitionScheme

__all__ = [
    "BLOB_STORE_FACTORY",
    "FIELD_KEYS",
    "KAFKA_CHANGELOG_FACTORY",
    "KEYS",
    "MAX_ELASTICITY_FACTOR",
    "REPORTER_CLASSES",
    "REPORTER_KEYS",
    "RULES",
    "STATE_BACKEND_FACTORIES",
    "STORE_BACKENDS",
    "STORE_KEYS",
    "SYSTEM_KEYS",
    "ConfigError",
    "ConfigWarning",
    "Grouper",
    "JobConfig",
    "Key",
    "Parser",
    "PartitionScheme",
    "did_you_mean",
    "elasticity_home",
    "find_key",
    "key_value",
    "key",
    "load_config",
    "parse_factories",
    "parse_properties",
    "parse_side_inputs",
    "store_url",
    "validate",
]
