"""The local stack: what the embedded default, `make cluster`, the tests and the
benchmarks start on this machine. The Kafka-protocol broker, the Spark Connect
server, a standalone Spark cluster and its supervisor, an S3-protocol server,
`airflow standalone`, and the demo's story through Airflow's REST API.

Production code (engine, checkpoints, state, quality, Airflow operators and
hooks) never imports it: a job finds the embedded services through their state
files (`elasticity.config.services`), as it finds any other address."""
