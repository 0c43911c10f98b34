"""The declared schema of a typed output: a Spark DDL string (`order_id BIGINT, amount DOUBLE, note STRING`) or
an Avro record schema, as one list of typed fields; each becomes a Parquet column of its Arrow type beside the
output's provenance columns, which pandas, pyarrow and Spark read as typed columns.

A record fits when each field's value has the field's type (an int for BIGINT, a number for DOUBLE, ...):
nothing is coerced from text, so a wrong value is a dead letter naming the field, never a silent null.

Evolution follows the Schema Registry's BACKWARD rule for files (Avro's, Confluent's): a reader of the new schema
reads the files already written. Adding a nullable field, dropping one, and making a NOT NULL field nullable are
allowed; changing a field's type, dropping a NOT NULL field, and adding a NOT NULL field are refused."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from elasticity.serializers import RecordSerdeError

# Spark's names (and their aliases) of the types a typed column may have
_SIMPLE = {
    "BOOLEAN": "BOOLEAN",
    "TINYINT": "TINYINT",
    "BYTE": "TINYINT",
    "SMALLINT": "SMALLINT",
    "SHORT": "SMALLINT",
    "INT": "INT",
    "INTEGER": "INT",
    "BIGINT": "BIGINT",
    "LONG": "BIGINT",
    "FLOAT": "FLOAT",
    "REAL": "FLOAT",
    "DOUBLE": "DOUBLE",
    "STRING": "STRING",
    "BINARY": "BINARY",
    "DATE": "DATE",
    "TIMESTAMP": "TIMESTAMP",
}
_INT_RANGE = {"TINYINT": 8, "SMALLINT": 16, "INT": 32, "BIGINT": 64}
_ARROW = {
    "BOOLEAN": pa.bool_(),
    "TINYINT": pa.int8(),
    "SMALLINT": pa.int16(),
    "INT": pa.int32(),
    "BIGINT": pa.int64(),
    "FLOAT": pa.float32(),
    "DOUBLE": pa.float64(),
    "STRING": pa.string(),
    "BINARY": pa.binary(),
    "DATE": pa.date32(),
    "TIMESTAMP": pa.timestamp("us", tz="UTC"),
}
_FIELD = re.compile(
    r"^\s*(?P<name>`[^`]+`|[A-Za-z_][A-Za-z0-9_]*)\s*:?\s+(?P<type>[A-Za-z]+(?:\s*\(\s*\d+\s*(?:,\s*\d+\s*)?\))?)"
    r"(?P<notnull>\s+NOT\s+NULL)?(?:\s+COMMENT\s+'(?:[^'\\]|\\.)*')?\s*$",
    re.I,
)
_DECIMAL = re.compile(r"^(?:DECIMAL|DEC|NUMERIC)\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?$", re.I)
_STRINGS = re.compile(r"^(?:VARCHAR|CHAR)\s*\(\s*\d+\s*\)$", re.I)
PROVENANCE_COLUMNS = (
    "key",
    "value",
    "task_name",
    "batch_id",
    "seq",
    "source_partition",
    "source_offset",
    "source_system",
    "source_stream",
)
"""An output file's own columns (batch.sinks.outputs.OUTPUT_SCHEMA): no typed field may take one's name."""
ALLOWED_TYPES = (
    "BOOLEAN, TINYINT, SMALLINT, INT, BIGINT, FLOAT, DOUBLE, DECIMAL(p,s), STRING, VARCHAR(n), CHAR(n), BINARY, DATE, TIMESTAMP"
)


@dataclass(frozen=True)
class TypedField:
    name: str
    type: str  # Spark's canonical name: BIGINT, DOUBLE, DECIMAL(10,2), ...
    nullable: bool = True

    @property
    def arrow(self) -> pa.Field:
        return pa.field(self.name, arrow_type(self.type), nullable=self.nullable)

    def __str__(self) -> str:
        return f"{self.name} {self.type}{'' if self.nullable else ' NOT NULL'}"


@dataclass(frozen=True)
class TypedSchema:
    fields: tuple[TypedField, ...]

    def arrow(self) -> list[pa.Field]:
        return [f.arrow for f in self.fields]

    def ddl(self) -> str:
        return ", ".join(map(str, self.fields))

    def row(self, value: Any) -> tuple[Any, ...]:
        """The record's value of each field, checked against its type; `RecordSerdeError` names the field and why."""
        if not isinstance(value, Mapping):
            raise RecordSerdeError(f"a typed output takes a record (a dict), not {type(value).__name__}")
        return tuple(_checked(f, value.get(f.name)) for f in self.fields)


def arrow_type(spark_type: str) -> pa.DataType:
    m = re.fullmatch(r"DECIMAL\((\d+),(\d+)\)", spark_type)
    return pa.decimal128(int(m[1]), int(m[2])) if m else _ARROW[spark_type]


def _canonical_type(text: str) -> str:
    t = re.sub(r"\s+", "", text).upper()
    if t in _SIMPLE:
        return _SIMPLE[t]
    if _STRINGS.match(t):
        return "STRING"
    if m := _DECIMAL.match(t):
        precision, scale = int(m[1] or 10), int(m[2] or 0)
        if not (1 <= precision <= 38 and 0 <= scale <= precision):
            raise ValueError(f"{text}: DECIMAL(p,s) needs 1 <= p <= 38 and 0 <= s <= p")
        return f"DECIMAL({precision},{scale})"
    raise ValueError(f"type {text!r} is not one of {ALLOWED_TYPES}")


def _split_top(text: str) -> list[str]:
    """Split at the commas outside parentheses and quotes (DECIMAL(10,2) and comments keep theirs)."""
    parts, depth, quoted, start = [], 0, False, 0
    for i, ch in enumerate(text):
        if ch == "'" and (i == 0 or text[i - 1] != "\\"):
            quoted = not quoted
        elif not quoted and ch == "(":
            depth += 1
        elif not quoted and ch == ")":
            depth -= 1
        elif not quoted and depth == 0 and ch == ",":
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def parse_ddl(text: str) -> TypedSchema:
    """Spark's DDL of a struct's fields (`StructType.fromDDL`): `name TYPE [NOT NULL] [COMMENT '...']`, comma-separated.
    A ValueError names the field and what is expected."""
    fields = []
    for part in _split_top(text):
        if not part.strip():
            raise ValueError(f"an empty field in {text!r}: expected `name TYPE [NOT NULL]`, comma-separated")
        m = _FIELD.match(part)
        if m is None:
            raise ValueError(f"{part.strip()!r}: expected `name TYPE [NOT NULL]` with a type of {ALLOWED_TYPES}")
        fields.append(TypedField(m["name"].strip("`"), _canonical_type(m["type"]), nullable=not m["notnull"]))
    return _unique(fields)


def _unique(fields: list[TypedField]) -> TypedSchema:
    seen: set[str] = set()
    for f in fields:
        if f.name in PROVENANCE_COLUMNS:
            raise ValueError(
                f"field {f.name!r} is a column every output has ({', '.join(PROVENANCE_COLUMNS)}); expected another name"
            )
        if f.name.lower() in seen:
            raise ValueError(f"field {f.name!r} declared twice")
        seen.add(f.name.lower())
    return TypedSchema(tuple(fields))


_AVRO = {
    "boolean": "BOOLEAN",
    "int": "INT",
    "long": "BIGINT",
    "float": "FLOAT",
    "double": "DOUBLE",
    "string": "STRING",
    "bytes": "BINARY",
    "enum": "STRING",
    "fixed": "BINARY",
}


def from_avro(schema_text: str) -> TypedSchema:
    """An Avro record schema's fields (their nullable unions with null, logical dates, timestamps and decimals)."""
    schema = json.loads(schema_text)
    if not isinstance(schema, dict) or schema.get("type") != "record":
        raise ValueError("a typed output's Avro schema must be a record")
    fields = []
    for f in schema.get("fields", []):
        t, nullable = f["type"], False
        if isinstance(t, list):
            others = [x for x in t if x != "null"]
            if len(others) != 1:
                raise ValueError(f"field {f['name']!r}: a union other than [null, T] has no column type")
            t, nullable = others[0], len(others) < len(t)
        fields.append(TypedField(f["name"], _avro_type(f["name"], t), nullable))
    return _unique(fields)


def _avro_type(name: str, t: Any) -> str:
    logical = t.get("logicalType") if isinstance(t, dict) else None
    if logical == "date":
        return "DATE"
    if logical in ("timestamp-millis", "timestamp-micros"):
        return "TIMESTAMP"
    if logical == "decimal":
        return f"DECIMAL({t['precision']},{t.get('scale', 0)})"
    base = t.get("type") if isinstance(t, dict) else t
    if base in _AVRO:
        return _AVRO[base]
    raise ValueError(
        f"field {name!r}: Avro type {json.dumps(t)} has no column type (records, arrays and maps are not typed columns)"
    )


def from_arrow(fields: list[pa.Field]) -> TypedSchema:
    """The typed columns of files already written, in the declared schema's terms."""
    out = []
    for f in fields:
        spark = next((s for s, a in _ARROW.items() if a == f.type), None)
        if spark is None and pa.types.is_decimal(f.type):
            spark = f"DECIMAL({f.type.precision},{f.type.scale})"
        out.append(TypedField(f.name, spark or str(f.type), f.nullable))
    return TypedSchema(tuple(out))


def incompatibilities(written: TypedSchema, declared: TypedSchema) -> list[str]:
    """Why files written with `written` cannot stay beside files of `declared` (empty: they can), each naming
    the field: a type changed, a NOT NULL field dropped, a NOT NULL field added."""
    old = {f.name: f for f in written.fields}
    new = {f.name: f for f in declared.fields}
    problems = []
    for name, f in new.items():
        if name in old and old[name].type != f.type:
            problems.append(f"field {name!r}: type changed from {old[name].type} to {f.type} (expected {old[name].type})")
        elif name not in old and not f.nullable:
            problems.append(f"field {name!r}: added NOT NULL (files already written have no value for it); expected it nullable")
    for name, f in old.items():
        if name not in new and not f.nullable:
            problems.append(f"field {name!r}: NOT NULL in the files already written, dropped; expected it kept")
    return problems


def _checked(f: TypedField, v: Any) -> Any:
    if v is None:
        if not f.nullable:
            raise RecordSerdeError(f"field {f.name!r}: missing or null, and it is {f.type} NOT NULL")
        return None
    t = f.type
    ok: bool
    if t == "BOOLEAN":
        ok = isinstance(v, bool)
    elif t in _INT_RANGE:
        bits = _INT_RANGE[t]
        ok = isinstance(v, int) and not isinstance(v, bool) and -(2 ** (bits - 1)) <= v < 2 ** (bits - 1)
    elif t in ("FLOAT", "DOUBLE"):
        ok = isinstance(v, int | float) and not isinstance(v, bool)
        v = float(v) if ok else v
    elif t == "STRING":
        ok = isinstance(v, str)
    elif t == "BINARY":
        ok = isinstance(v, bytes | bytearray)
    elif t == "DATE":
        ok = isinstance(v, dt.date) and not isinstance(v, dt.datetime)
    elif t == "TIMESTAMP":
        ok = isinstance(v, dt.datetime)
    else:  # DECIMAL(p,s)
        ok = _fits_decimal(t, v)
        v = decimal.Decimal(str(v)) if ok and not isinstance(v, decimal.Decimal) else v
    if not ok:
        raise RecordSerdeError(f"field {f.name!r}: {_shown(v)} is not {t}")
    return v


def _fits_decimal(t: str, v: Any) -> bool:
    m = re.fullmatch(r"DECIMAL\((\d+),(\d+)\)", t)
    assert m is not None
    if isinstance(v, bool) or not isinstance(v, int | float | decimal.Decimal):
        return False
    d = decimal.Decimal(str(v))
    if not d.is_finite():
        return False
    precision, scale = int(m[1]), int(m[2])
    exponent = d.as_tuple().exponent
    assert isinstance(exponent, int)
    return -exponent <= scale and len(d.quantize(decimal.Decimal(1).scaleb(-scale)).as_tuple().digits) <= precision


def _shown(v: Any) -> str:
    text = repr(v)
    return f"{text[:60]}... ({type(v).__name__})" if len(text) > 60 else f"{text} ({type(v).__name__})"
