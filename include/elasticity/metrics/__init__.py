"""What a batch reports and what is drawn from it: SEP-32's metrics under Samza's names, the batch
summary the store keeps, the reporters that send them on (StatsD), and, read back from the store,
lag and records/s over batches with rescales marked, drawn as inline SVG charts for the job page and
the data-quality reports."""
