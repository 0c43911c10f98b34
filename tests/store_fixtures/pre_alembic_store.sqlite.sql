BEGIN TRANSACTION;
CREATE TABLE elasticity_batch_metrics (
	job_name VARCHAR(255) NOT NULL, 
	batch_id BIGINT NOT NULL, 
	generation INTEGER NOT NULL, 
	created_ms BIGINT NOT NULL, 
	metrics TEXT NOT NULL, 
	freshness_oldest_ms BIGINT, 
	freshness_newest_ms BIGINT, 
	PRIMARY KEY (job_name, batch_id)
);
INSERT INTO "elasticity_batch_metrics" VALUES('orders',1,1,1767225610000,'{"batch_id": 1, "records": 20, "duration_ms": 1501}',900,120);
INSERT INTO "elasticity_batch_metrics" VALUES('orders',3,2,1767225622000,'{"batch_id": 3, "records": 40, "duration_ms": 1503}',1800,300);
INSERT INTO "elasticity_batch_metrics" VALUES('clicks',1,1,1767225636000,'{"batch_id": 1, "records": 8, "duration_ms": 1501}',NULL,NULL);
CREATE TABLE elasticity_batches (
	job_name VARCHAR(255) NOT NULL, 
	batch_id BIGINT NOT NULL, 
	generation INTEGER NOT NULL, 
	ranges TEXT NOT NULL, 
	side_inputs TEXT, 
	status VARCHAR(16) NOT NULL, 
	planned_ms BIGINT NOT NULL, 
	committed_ms BIGINT, 
	PRIMARY KEY (job_name, batch_id)
);
INSERT INTO "elasticity_batches" VALUES('orders',1,1,'[["kafka.orders.0", 0, 10], ["kafka.orders.1", 0, 10]]','[["kafka.prices.0", 7]]','committed',1767225606000,1767225609000);
INSERT INTO "elasticity_batches" VALUES('orders',2,1,'[["kafka.orders.0", 10, 20], ["kafka.orders.1", 10, 20]]',NULL,'abandoned',1767225612000,NULL);
INSERT INTO "elasticity_batches" VALUES('orders',3,2,'[["kafka.orders.0", 10, 30], ["kafka.orders.1", 10, 30]]',NULL,'committed',1767225618000,1767225621000);
INSERT INTO "elasticity_batches" VALUES('orders',4,2,'[["kafka.orders.0", 30, 45], ["kafka.orders.1", 30, 45]]',NULL,'planned',1767225627000,NULL);
INSERT INTO "elasticity_batches" VALUES('clicks',1,1,'[["kafka.clicks.0", 0, 4], ["kafka.clicks.1", 0, 4]]',NULL,'committed',1767225632000,1767225635000);
CREATE TABLE elasticity_checkpoints (
	id INTEGER NOT NULL, 
	job_name VARCHAR(255) NOT NULL, 
	generation INTEGER NOT NULL, 
	task_name VARCHAR(1024) NOT NULL, 
	version SMALLINT NOT NULL, 
	payload TEXT NOT NULL, 
	watermarks TEXT, 
	batch_id BIGINT, 
	created_ms BIGINT NOT NULL, 
	PRIMARY KEY (id)
);
INSERT INTO "elasticity_checkpoints" VALUES(1,'orders',1,'Partition_0-0-2',1,'{"SystemStreamPartition [kafka, orders, 0, 0]":{"system":"kafka","partition":"0","keyBucket":"0","offset":"0","stream":"orders"}}',NULL,NULL,1767225603000);
INSERT INTO "elasticity_checkpoints" VALUES(2,'orders',1,'Partition_0-0-2',2,'{"checkpoint-id":"1767225700000-0","input-offsets":{"kafka.orders.0.0":"0"},"state-checkpoint-markers":{"counts":{"blobstore":"snapshot-1-0-0"}},"version":2}',NULL,NULL,1767225603000);
INSERT INTO "elasticity_checkpoints" VALUES(3,'orders',1,'Partition_0-1-2',1,'{"SystemStreamPartition [kafka, orders, 0, 1]":{"system":"kafka","partition":"0","keyBucket":"1","offset":"0","stream":"orders"}}',NULL,NULL,1767225603000);
INSERT INTO "elasticity_checkpoints" VALUES(4,'orders',1,'Partition_0-1-2',2,'{"checkpoint-id":"1767225700000-1","input-offsets":{"kafka.orders.0.1":"0"},"state-checkpoint-markers":{"counts":{"blobstore":"snapshot-1-0-1"}},"version":2}',NULL,NULL,1767225603000);
INSERT INTO "elasticity_checkpoints" VALUES(5,'orders',1,'Partition_1-0-2',1,'{"SystemStreamPartition [kafka, orders, 1, 0]":{"system":"kafka","partition":"1","keyBucket":"0","offset":"1","stream":"orders"}}',NULL,NULL,1767225603000);
INSERT INTO "elasticity_checkpoints" VALUES(6,'orders',1,'Partition_1-0-2',2,'{"checkpoint-id":"1767225700000-2","input-offsets":{"kafka.orders.1.0":"1"},"state-checkpoint-markers":{"counts":{"blobstore":"snapshot-1-0-2"}},"version":2}',NULL,NULL,1767225603000);
INSERT INTO "elasticity_checkpoints" VALUES(7,'orders',1,'Partition_1-1-2',1,'{"SystemStreamPartition [kafka, orders, 1, 1]":{"system":"kafka","partition":"1","keyBucket":"1","offset":"1","stream":"orders"}}',NULL,NULL,1767225603000);
INSERT INTO "elasticity_checkpoints" VALUES(8,'orders',1,'Partition_1-1-2',2,'{"checkpoint-id":"1767225700000-3","input-offsets":{"kafka.orders.1.1":"1"},"state-checkpoint-markers":{"counts":{"blobstore":"snapshot-1-0-3"}},"version":2}',NULL,NULL,1767225603000);
INSERT INTO "elasticity_checkpoints" VALUES(9,'orders',1,'Partition_0-0-2',1,'{"SystemStreamPartition [kafka, orders, 0, 0]":{"system":"kafka","partition":"0","keyBucket":"0","offset":"10","stream":"orders"}}',NULL,1,1767225607000);
INSERT INTO "elasticity_checkpoints" VALUES(10,'orders',1,'Partition_0-0-2',2,'{"checkpoint-id":"1767225701000-0","input-offsets":{"kafka.orders.0.0":"10"},"state-checkpoint-markers":{"counts":{"blobstore":"snapshot-1-1-0"}},"version":2}',NULL,1,1767225607000);
INSERT INTO "elasticity_checkpoints" VALUES(11,'orders',1,'Partition_0-1-2',1,'{"SystemStreamPartition [kafka, orders, 0, 1]":{"system":"kafka","partition":"0","keyBucket":"1","offset":"10","stream":"orders"}}',NULL,1,1767225607000);
INSERT INTO "elasticity_checkpoints" VALUES(12,'orders',1,'Partition_0-1-2',2,'{"checkpoint-id":"1767225701000-1","input-offsets":{"kafka.orders.0.1":"10"},"state-checkpoint-markers":{"counts":{"blobstore":"snapshot-1-1-1"}},"version":2}',NULL,1,1767225607000);
INSERT INTO "elasticity_checkpoints" VALUES(13,'orders',1,'Partition_1-0-2',1,'{"SystemStreamPartition [kafka, orders, 1, 0]":{"system":"kafka","partition":"1","keyBucket":"0","offset":"11","stream":"orders"}}',NULL,1,1767225607000);
INSERT INTO "elasticity_checkpoints" VALUES(14,'orders',1,'Partition_1-0-2',2,'{"checkpoint-id":"1767225701000-2","input-offsets":{"kafka.orders.1.0":"11"},"state-checkpoint-markers":{"counts":{"blobstore":"snapshot-1-1-2"}},"version":2}',NULL,1,1767225607000);
INSERT INTO "elasticity_checkpoints" VALUES(15,'orders',1,'Partition_1-1-2',1,'{"SystemStreamPartition [kafka, orders, 1, 1]":{"system":"kafka","partition":"1","keyBucket":"1","offset":"11","stream":"orders"}}',NULL,1,1767225607000);
INSERT INTO "elasticity_checkpoints" VALUES(16,'orders',1,'Partition_1-1-2',2,'{"checkpoint-id":"1767225701000-3","input-offsets":{"kafka.orders.1.1":"11"},"state-checkpoint-markers":{"counts":{"blobstore":"snapshot-1-1-3"}},"version":2}',NULL,1,1767225607000);
INSERT INTO "elasticity_checkpoints" VALUES(17,'orders',2,'Partition_0-0-4',1,'{"SystemStreamPartition [kafka, orders, 0, 0]":{"system":"kafka","partition":"0","keyBucket":"0","offset":"10","stream":"orders"}}',NULL,NULL,1767225615000);
INSERT INTO "elasticity_checkpoints" VALUES(18,'orders',2,'Partition_0-0-4',2,'{"checkpoint-id":"1767225801000-0","input-offsets":{"kafka.orders.0.0":"10"},"state-checkpoint-markers":{"counts":{"blobstore":"snapshot-2-1-0"}},"version":2}',NULL,NULL,1767225615000);
INSERT INTO "elasticity_checkpoints" VALUES(19,'orders',2,'Partition_0-1-4',1,'{"SystemStreamPartition [kafka, orders, 0, 1]":{"system":"kafka","partition":"0","keyBucket":"1","offset":"10","stream":"orders"}}','{"kafka.orders.0.1": [[2, 1, 15]]}',NULL,1767225615000);
INSERT INTO "elasticity_checkpoints" VALUES(20,'orders',2,'Partition_0-1-4',2,'{"checkpoint-id":"1767225801000-1","input-offsets":{"kafka.orders.0.1":"10"},"state-checkpoint-markers":{"counts":{"blobstore":"snapshot-2-1-1"}},"version":2}','{"kafka.orders.0.1": [[2, 1, 15]]}',NULL,1767225615000);
INSERT INTO "elasticity_checkpoints" VALUES(21,'orders',2,'Partition_0-2-4',1,'{"SystemStreamPartition [kafka, orders, 0, 2]":{"system":"kafka","partition":"0","keyBucket":"2","offset":"10","stream":"orders"}}',NULL,NULL,1767225615000);
INSERT INTO "elasticity_checkpoints" VALUES(22,'orders',2,'Partition_0-2-4',2,'{"checkpoint-id":"1767225801000-2","input-offsets":{"kafka.orders.0.2":"10"},"state-checkpoint-markers":{"counts":{"blobstore":"snapshot-2-1-2"}},"version":2}',NULL,NULL,1767225615000);
INSERT INTO "elasticity_checkpoints" VALUES(23,'orders',2,'Partition_0-3-4',1,'{"SystemStreamPartition [kafka, orders, 0, 3]":{"system":"kafka","partition":"0","keyBucket":"3","offset":"10","stream":"orders"}}',NULL,NULL,1767225615000);
INSERT INTO "elasticity_checkpoints" VALUES(24,'orders',2,'Partition_0-3-4',2,'{"checkpoint-id":"1767225801000-3","input-offsets":{"kafka.orders.0.3":"10"},"state-checkpoint-markers":{"counts":{"blobstore":"snapshot-2-1-3"}},"version":2}',NULL,NULL,1767225615000);
INSERT INTO "elasticity_checkpoints" VALUES(25,'orders',2,'Partition_1-0-4',1,'{"SystemStreamPartition [kafka, orders, 1, 0]":{"system":"kafka","partition":"1","keyBucket":"0","offset":"11","stream":"orders"}}',NULL,NULL,1767225615000);
INSERT INTO "elasticity_checkpoints" VALUES(26,'orders',2,'Partition_1-0-4',2,'{"checkpoint-id":"1767225801000-4","input-offsets":{"kafka.orders.1.0":"11"},"state-checkpoint-markers":{"counts":{"blobstore":"snapshot-2-1-4"}},"version":2}',NULL,NULL,1767225615000);
INSERT INTO "elasticity_checkpoints" VALUES(27,'orders',2,'Partition_1-1-4',1,'{"SystemStreamPartition [kafka, orders, 1, 1]":{"system":"kafka","partition":"1","keyBucket":"1","offset":"11","stream":"orders"}}','{"kafka.orders.1.1": [[2, 1, 15]]}',NULL,1767225615000);
INSERT INTO "elasticity_checkpoints" VALUES(28,'orders',2,'Partition_1-1-4',2,'{"checkpoint-id":"1767225801000-5","input-offsets":{"kafka.orders.1.1":"11"},"state-checkpoint-markers":{"counts":{"blobstore":"snapshot-2-1-5"}},"version":2}','{"kafka.orders.1.1": [[2, 1, 15]]}',NULL,1767225615000);
INSERT INTO "elasticity_checkpoints" VALUES(29,'orders',2,'Partition_1-2-4',1,'{"SystemStreamPartition [kafka, orders, 1, 2]":{"system":"kafka","partition":"1","keyBucket":"2","offset":"11","stream":"orders"}}',NULL,NULL,1767225615000);
INSERT INTO "elasticity_checkpoints" VALUES(30,'orders',2,'Partition_1-2-4',2,'{"checkpoint-id":"1767225801000-6","input-offsets":{"kafka.orders.1.2":"11"},"state-checkpoint-markers":{"counts":{"blobstore":"snapshot-2-1-6"}},"version":2}',NULL,NULL,1767225615000);
INSERT INTO "elasticity_checkpoints" VALUES(31,'orders',2,'Partition_1-3-4',1,'{"SystemStreamPartition [kafka, orders, 1, 3]":{"system":"kafka","partition":"1","keyBucket":"3","offset":"11","stream":"orders"}}',NULL,NULL,1767225615000);
INSERT INTO "elasticity_checkpoints" VALUES(32,'orders',2,'Partition_1-3-4',2,'{"checkpoint-id":"1767225801000-7","input-offsets":{"kafka.orders.1.3":"11"},"state-checkpoint-markers":{"counts":{"blobstore":"snapshot-2-1-7"}},"version":2}',NULL,NULL,1767225615000);
INSERT INTO "elasticity_checkpoints" VALUES(33,'orders',2,'Partition_0-0-4',1,'{"SystemStreamPartition [kafka, orders, 0, 0]":{"system":"kafka","partition":"0","keyBucket":"0","offset":"30","stream":"orders"}}',NULL,3,1767225619000);
INSERT INTO "elasticity_checkpoints" VALUES(34,'orders',2,'Partition_0-0-4',2,'{"checkpoint-id":"1767225803000-0","input-offsets":{"kafka.orders.0.0":"30"},"state-checkpoint-markers":{"counts":{"blobstore":"snapshot-2-3-0"}},"version":2}',NULL,3,1767225619000);
INSERT INTO "elasticity_checkpoints" VALUES(35,'orders',2,'Partition_0-1-4',1,'{"SystemStreamPartition [kafka, orders, 0, 1]":{"system":"kafka","partition":"0","keyBucket":"1","offset":"30","stream":"orders"}}','{"kafka.orders.0.1": [[2, 1, 35]]}',3,1767225619000);
INSERT INTO "elasticity_checkpoints" VALUES(36,'orders',2,'Partition_0-1-4',2,'{"checkpoint-id":"1767225803000-1","input-offsets":{"kafka.orders.0.1":"30"},"state-checkpoint-markers":{"counts":{"blobstore":"snapshot-2-3-1"}},"version":2}','{"kafka.orders.0.1": [[2, 1, 35]]}',3,1767225619000);
INSERT INTO "elasticity_checkpoints" VALUES(37,'orders',2,'Partition_0-2-4',1,'{"SystemStreamPartition [kafka, orders, 0, 2]":{"system":"kafka","partition":"0","keyBucket":"2","offset":"30","stream":"orders"}}',NULL,3,1767225619000);
INSERT INTO "elasticity_checkpoints" VALUES(38,'orders',2,'Partition_0-2-4',2,'{"checkpoint-id":"1767225803000-2","input-offsets":{"kafka.orders.0.2":"30"},"state-checkpoint-markers":{"counts":{"blobstore":"snapshot-2-3-2"}},"version":2}',NULL,3,1767225619000);
INSERT INTO "elasticity_checkpoints" VALUES(39,'orders',2,'Partition_0-3-4',1,'{"SystemStreamPartition [kafka, orders, 0, 3]":{"system":"kafka","partition":"0","keyBucket":"3","offset":"30","stream":"orders"}}',NULL,3,1767225619000);
INSERT INTO "elasticity_checkpoints" VALUES(40,'orders',2,'Partition_0-3-4',2,'{"checkpoint-id":"1767225803000-3","input-offsets":{"kafka.orders.0.3":"30"},"state-checkpoint-markers":{"counts":{"blobstore":"snapshot-2-3-3"}},"version":2}',NULL,3,1767225619000);
INSERT INTO "elasticity_checkpoints" VALUES(41,'orders',2,'Partition_1-0-4',1,'{"SystemStreamPartition [kafka, orders, 1, 0]":{"system":"kafka","partition":"1","keyBucket":"0","offset":"31","stream":"orders"}}',NULL,3,1767225619000);
INSERT INTO "elasticity_checkpoints" VALUES(42,'orders',2,'Partition_1-0-4',2,'{"checkpoint-id":"1767225803000-4","input-offsets":{"kafka.orders.1.0":"31"},"state-checkpoint-markers":{"counts":{"blobstore":"snapshot-2-3-4"}},"version":2}',NULL,3,1767225619000);
INSERT INTO "elasticity_checkpoints" VALUES(43,'orders',2,'Partition_1-1-4',1,'{"SystemStreamPartition [kafka, orders, 1, 1]":{"system":"kafka","partition":"1","keyBucket":"1","offset":"31","stream":"orders"}}','{"kafka.orders.1.1": [[2, 1, 35]]}',3,1767225619000);
INSERT INTO "elasticity_checkpoints" VALUES(44,'orders',2,'Partition_1-1-4',2,'{"checkpoint-id":"1767225803000-5","input-offsets":{"kafka.orders.1.1":"31"},"state-checkpoint-markers":{"counts":{"blobstore":"snapshot-2-3-5"}},"version":2}','{"kafka.orders.1.1": [[2, 1, 35]]}',3,1767225619000);
INSERT INTO "elasticity_checkpoints" VALUES(45,'orders',2,'Partition_1-2-4',1,'{"SystemStreamPartition [kafka, orders, 1, 2]":{"system":"kafka","partition":"1","keyBucket":"2","offset":"31","stream":"orders"}}',NULL,3,1767225619000);
INSERT INTO "elasticity_checkpoints" VALUES(46,'orders',2,'Partition_1-2-4',2,'{"checkpoint-id":"1767225803000-6","input-offsets":{"kafka.orders.1.2":"31"},"state-checkpoint-markers":{"counts":{"blobstore":"snapshot-2-3-6"}},"version":2}',NULL,3,1767225619000);
INSERT INTO "elasticity_checkpoints" VALUES(47,'orders',2,'Partition_1-3-4',1,'{"SystemStreamPartition [kafka, orders, 1, 3]":{"system":"kafka","partition":"1","keyBucket":"3","offset":"31","stream":"orders"}}',NULL,3,1767225619000);
INSERT INTO "elasticity_checkpoints" VALUES(48,'orders',2,'Partition_1-3-4',2,'{"checkpoint-id":"1767225803000-7","input-offsets":{"kafka.orders.1.3":"31"},"state-checkpoint-markers":{"counts":{"blobstore":"snapshot-2-3-7"}},"version":2}',NULL,3,1767225619000);
INSERT INTO "elasticity_checkpoints" VALUES(49,'clicks',1,'Partition 0',1,'{"SystemStreamPartition [kafka, clicks, 0]":{"system":"kafka","partition":"0","offset":"0","stream":"clicks"}}',NULL,NULL,1767225630000);
INSERT INTO "elasticity_checkpoints" VALUES(50,'clicks',1,'Partition 1',1,'{"SystemStreamPartition [kafka, clicks, 1]":{"system":"kafka","partition":"1","offset":"1","stream":"clicks"}}',NULL,NULL,1767225630000);
INSERT INTO "elasticity_checkpoints" VALUES(51,'clicks',1,'Partition 0',1,'{"SystemStreamPartition [kafka, clicks, 0]":{"system":"kafka","partition":"0","offset":"4","stream":"clicks"}}',NULL,1,1767225633000);
INSERT INTO "elasticity_checkpoints" VALUES(52,'clicks',1,'Partition 1',1,'{"SystemStreamPartition [kafka, clicks, 1]":{"system":"kafka","partition":"1","offset":"5","stream":"clicks"}}',NULL,1,1767225633000);
CREATE TABLE elasticity_generations (
	job_name VARCHAR(255) NOT NULL, 
	generation INTEGER NOT NULL, 
	factor INTEGER NOT NULL, 
	job_model TEXT NOT NULL, 
	reason TEXT NOT NULL, 
	created_ms BIGINT NOT NULL, 
	origin VARCHAR(32), 
	PRIMARY KEY (job_name, generation)
);
INSERT INTO "elasticity_generations" VALUES('orders',1,2,'{"config": {"job.elasticity.factor": "2", "job.name": "orders", "task.inputs": "kafka.orders"}, "containers": {"0": {"processor-id": "0", "tasks": {"Partition_0-0-2": {"task-name": "Partition_0-0-2", "system-stream-partitions": [{"system": "kafka", "stream": "orders", "partition": 0, "keyBucket": 0}], "changelog-partition": 0, "task-mode": "Active"}, "Partition_0-1-2": {"task-name": "Partition_0-1-2", "system-stream-partitions": [{"system": "kafka", "stream": "orders", "partition": 0, "keyBucket": 1}], "changelog-partition": 1, "task-mode": "Active"}, "Partition_1-0-2": {"task-name": "Partition_1-0-2", "system-stream-partitions": [{"system": "kafka", "stream": "orders", "partition": 1, "keyBucket": 0}], "changelog-partition": 2, "task-mode": "Active"}, "Partition_1-1-2": {"task-name": "Partition_1-1-2", "system-stream-partitions": [{"system": "kafka", "stream": "orders", "partition": 1, "keyBucket": 1}], "changelog-partition": 3, "task-mode": "Active"}}}}}','first start',1767225602000,'start');
INSERT INTO "elasticity_generations" VALUES('orders',2,4,'{"config": {"job.elasticity.factor": "4", "job.name": "orders", "task.inputs": "kafka.orders"}, "containers": {"0": {"processor-id": "0", "tasks": {"Partition_0-0-4": {"task-name": "Partition_0-0-4", "system-stream-partitions": [{"system": "kafka", "stream": "orders", "partition": 0, "keyBucket": 0}], "changelog-partition": 0, "task-mode": "Active"}, "Partition_0-1-4": {"task-name": "Partition_0-1-4", "system-stream-partitions": [{"system": "kafka", "stream": "orders", "partition": 0, "keyBucket": 1}], "changelog-partition": 1, "task-mode": "Active"}, "Partition_0-2-4": {"task-name": "Partition_0-2-4", "system-stream-partitions": [{"system": "kafka", "stream": "orders", "partition": 0, "keyBucket": 2}], "changelog-partition": 2, "task-mode": "Active"}, "Partition_0-3-4": {"task-name": "Partition_0-3-4", "system-stream-partitions": [{"system": "kafka", "stream": "orders", "partition": 0, "keyBucket": 3}], "changelog-partition": 3, "task-mode": "Active"}, "Partition_1-0-4": {"task-name": "Partition_1-0-4", "system-stream-partitions": [{"system": "kafka", "stream": "orders", "partition": 1, "keyBucket": 0}], "changelog-partition": 4, "task-mode": "Active"}, "Partition_1-1-4": {"task-name": "Partition_1-1-4", "system-stream-partitions": [{"system": "kafka", "stream": "orders", "partition": 1, "keyBucket": 1}], "changelog-partition": 5, "task-mode": "Active"}, "Partition_1-2-4": {"task-name": "Partition_1-2-4", "system-stream-partitions": [{"system": "kafka", "stream": "orders", "partition": 1, "keyBucket": 2}], "changelog-partition": 6, "task-mode": "Active"}, "Partition_1-3-4": {"task-name": "Partition_1-3-4", "system-stream-partitions": [{"system": "kafka", "stream": "orders", "partition": 1, "keyBucket": 3}], "changelog-partition": 7, "task-mode": "Active"}}}}}','rescale 2 -> 4',1767225614000,'manual');
INSERT INTO "elasticity_generations" VALUES('clicks',1,1,'{"config": {"job.elasticity.factor": "1", "job.name": "clicks", "task.inputs": "kafka.clicks"}, "containers": {"0": {"processor-id": "0", "tasks": {"Partition 0": {"task-name": "Partition 0", "system-stream-partitions": [{"system": "kafka", "stream": "clicks", "partition": 0, "keyBucket": -1}], "changelog-partition": 0, "task-mode": "Active"}, "Partition 1": {"task-name": "Partition 1", "system-stream-partitions": [{"system": "kafka", "stream": "clicks", "partition": 1, "keyBucket": -1}], "changelog-partition": 1, "task-mode": "Active"}}}}}','first start',1767225629000,'start');
CREATE TABLE elasticity_jobs (
	job_name VARCHAR(255) NOT NULL, 
	generation INTEGER NOT NULL, 
	lease_owner VARCHAR(255), 
	lease_expires_ms BIGINT, 
	updated_ms BIGINT NOT NULL, 
	PRIMARY KEY (job_name)
);
INSERT INTO "elasticity_jobs" VALUES('orders',2,'worker-1',1767229225000,1767225626000);
INSERT INTO "elasticity_jobs" VALUES('clicks',1,NULL,NULL,1767225634000);
CREATE TABLE elasticity_rescale_metrics (
	job_name VARCHAR(255) NOT NULL, 
	generation INTEGER NOT NULL, 
	created_ms BIGINT NOT NULL, 
	metrics TEXT NOT NULL, 
	PRIMARY KEY (job_name, generation)
);
INSERT INTO "elasticity_rescale_metrics" VALUES('orders',1,1767225604000,'{"job-model-generation-ns": 120000, "checkpoint-compute-ns": 0}');
INSERT INTO "elasticity_rescale_metrics" VALUES('orders',2,1767225616000,'{"job-model-generation-ns": 250000, "checkpoint-compute-ns": 80000}');
CREATE TABLE elasticity_transactions (
	job_name VARCHAR(255) NOT NULL, 
	transactional_id VARCHAR(512) NOT NULL, 
	system VARCHAR(255) NOT NULL, 
	state VARCHAR(16) NOT NULL, 
	created_ms BIGINT NOT NULL, 
	PRIMARY KEY (job_name, transactional_id)
);
INSERT INTO "elasticity_transactions" VALUES('orders','orders-0-1','kafka','closed',1767225623000);
INSERT INTO "elasticity_transactions" VALUES('orders','orders-0-3','kafka','open',1767225624000);
CREATE INDEX ix_elasticity_checkpoints_task ON elasticity_checkpoints (job_name, generation, task_name, version, id);
CREATE INDEX ix_elasticity_batch_metrics_created ON elasticity_batch_metrics (job_name, created_ms);
COMMIT;
