"""Record formats beyond the plain serdes: Confluent's wire format, Schema Registry serdes (Avro, Protobuf,
JSON Schema) and the declared schemas of typed outputs (Spark DDL, Avro) with their evolution rules."""
