"""Kafka access by role, as kafka-python lays it out: broker (the embedded one), admin, producer."""
