"""The job page with no Airflow import, so a benchmark builds it as the plugin does: the data it shows,
gathered once per request (jobview; also served as JSON), and its HTML (page), rendered from
autoescaped templates (`templates/`) with its style and script (`static/`) inlined."""
