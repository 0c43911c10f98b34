"""The job page's parts without Airflow: charts, rates, the view and its paging,
the rescale preview, and Data Docs made to open offline."""

import re

from bench.ui_bench import Inputs, drift, record_batches
from elasticity.batch.coordinator.job_coordinator import JobCoordinator
from elasticity.checkpoint.store import CheckpointStore
from elasticity.config import validate
from elasticity.metrics.charts import Chart, Series, nice_ticks, svg
from elasticity.metrics.rates import factor_marks, lag_series, task_rates
from elasticity.quality.offline_docs import offline_page
from elasticity.views.jobview import build_view, preview_rescale
from elasticity.views.page import PAGE_SIZE, render


def batch(b: int, factor: int, lag: dict) -> dict:
    return {
        "batch_id": b,
        "factor": factor,
        "records_read": 100,
        "durations_ms": {"total": 500},
        "metrics": {"lag": lag, "records": {"t0": 50, "t1": 0}, "process-ns": {"t0": 250_000_000, "t1": 1}},
    }


def test_ticks_are_round_and_cover_the_top():
    assert nice_ticks(870) == [0, 200, 400, 600, 800, 1000]
    assert nice_ticks(0) == [0.0, 1.0]


def test_lag_keeps_the_top_sspkb_and_sums_the_others():
    metrics = [batch(1, 2, {f"k{i}": i for i in range(8)}), batch(2, 4, {f"k{i}": 2 * i for i in range(8)})]
    series = lag_series(metrics, top=3)
    assert [s.name for s in series] == ["k7", "k6", "k5", "others"]
    assert series[-1].values == [sum(range(5)), 2 * sum(range(5))]
    assert factor_marks(metrics) == [(2, "factor 2\u21924")]
    assert task_rates(metrics[0]) == {"t0": 200.0}


def test_chart_has_axes_units_legend_hover_and_marks():
    out = svg(
        Chart(
            title="Lag",
            y_unit="offsets",
            xs=[3, 4, 5],
            series=[Series("kafka.o.0.1", [1, 5, 2]), Series("others", [0, 1, 1])],
            marks=[(4, "factor 2\u21924")],
        )
    )
    assert out.count('class="axis ') == 2 and ">offsets<" in out and "batch (3..5)" in out
    assert re.findall(r'class="legend-item"><i[^>]*></i>([^<]+)', out) == ["kafka.o.0.1", "others", "factor change"]
    assert "<title>batch 4: kafka.o.0.1 5 offsets</title>" in out and 'class="mark"' in out


def job(tmp_path, factor: int = 100):
    config = validate(
        {
            "job.name": "bench-ui",
            "task.inputs": "kafka.orders",
            "job.elasticity.factor": str(factor),
            "job.container.count": "4",
            "task.checkpoint.store.url": f"sqlite:///{tmp_path / 'cp.db'}",
            "job.report.path": str(tmp_path / "reports"),
        }
    )
    store = CheckpointStore(config.checkpoint_store_url())
    coordinator = JobCoordinator(config, store, Inputs())
    coordinator.initialize()
    drift(coordinator)
    record_batches(store, coordinator, 1, 3)
    return config, store


def test_view_pages_the_tasks_by_container_and_prefills_the_factor(tmp_path):
    config, store = job(tmp_path, factor=50)  # 8 partitions x 50 = 400 virtual tasks on 4 containers
    view = build_view(config, store, Inputs())
    assert len(view.tasks) == 400 and len(view.containers) == 4 and view.tasks[0].rate is not None
    page = render(view, page=2)
    assert page.count("<td class=task>") == PAGE_SIZE
    assert re.search(r'id=factor-input [^>]*value="50"', page)
    assert page.count("page 1</a>") + page.count("page 2</a>") + page.count("page 3</a>") + page.count("page 4</a>") == 4
    assert "Apply: trigger elastic_rescale" in page and "preview only" not in page
    assert "preview only" in render(view, can_trigger=False)


def test_preview_is_the_dry_run_of_the_migration(tmp_path):
    config, store = job(tmp_path, factor=2)
    view = build_view(config, store, Inputs())
    preview = preview_rescale(config, store, Inputs(), 4)
    assert (preview.old_factor, preview.new_factor, preview.tasks_before, preview.tasks_after) == (2, 4, 16, 32)
    offsets = {r.sspkb: r.offset for t in view.tasks for r in t.sspkbs}
    for m in preview.moves:  # a split: each child starts at its parent's offset
        p, b = m.sspkb.rsplit(".", 2)[1:]
        assert m.offset == offsets[f"kafka.orders.{p}.{int(b) % 2}"] and len(m.from_tasks) == 1
    assert preview_rescale(config, store, Inputs(), 2).changes_nothing
    assert preview.state is None  # the page's plan reads the checkpoints only


def test_data_docs_pages_lose_their_cdn_links():
    page = (
        '<html><head><link rel="stylesheet" href="https://maxcdn.bootstrapcdn.com/b.css"/>\n<script src="https://code.jquery.com/j.js"'
        ' integrity="x"></script>\n</head><body><img src="https://great-expectations-web-assets.s3.us-east-2.amazonaws.com/logo-long.png?d=1">'
        "</body></html>"
    )
    out = offline_page(page, "../../")
    assert "https://" not in out
    assert '<link rel="stylesheet" href="../../static/offline.css"><script src="../../static/offline.js"></script>' in out
    assert 'src="../../static/images/logo-long.png"' in out


def test_a_served_page_carries_its_reports_assets_inline_and_links_nothing_outside():
    """A sandboxed page's own requests carry no session cookie: what it loads from its report comes inline."""
    from elasticity.views.report_serving import ReportFile, self_contained

    files = {
        "runs/r1/data_docs/static/offline.css": ReportFile(b".x{color:red}</style><b>", "text/css"),
        "runs/r1/data_docs/static/offline.js": ReportFile(b"var s='</script>';", "text/javascript"),
        "runs/r1/data_docs/static/images/logo-long.png": ReportFile(b"\x89PNG", "image/png"),
    }

    def read(path: str) -> ReportFile:
        if path not in files:
            raise FileNotFoundError(path)
        return files[path]

    page = (
        '<html><head><link rel="stylesheet" href="../static/offline.css"><script src="../static/offline.js"></script>'
        '<link rel="shortcut icon" href="../static/images/favicon.ico"></head><body><img id=logo src="../static/images/logo-long.png">'
        '<a href="../index.html">up</a><script src="https://example.org/x.js"></script><img src="../../../../../etc/passwd"></body></html>'
    )
    out = self_contained(page, "runs/r1/data_docs/validations/v.html", read)
    assert "<style>.x{color:red}<\\/style><b></style>" in out
    assert "<script>var s='<\\/script>';</script>" in out
    assert '<img id=logo src="data:image/png;base64,iVBORw==">' in out
    assert 'href="../static/images/favicon.ico"' in out  # missing: left as it is
    assert '<a href="../index.html">' in out and '<script src="https://example.org/x.js"></script>' in out
    assert 'src="../../../../../etc/passwd"' in out  # outside the reports: never read


def test_the_state_preview_counts_what_moves():
    from elasticity.checkpoint.task_checkpoint import CheckpointId
    from elasticity.jobmodel.model import TaskName
    from elasticity.state.state_move import StateMove, Transfer
    from elasticity.views.jobview import state_preview

    a, b, c = (TaskName(f"Partition_0-{i}-4") for i in range(3))
    move = StateMove(
        old_factor=2,
        new_factor=4,
        checkpoint_id=CheckpointId(1, 0),
        from_generation=3,
        transfers=(
            Transfer(task=b, store="totals", sources=(a,), keys=5, bytes=120),
            Transfer(task=a, store="totals", sources=(a,), keys=7, bytes=200),
            Transfer(task=c, store="totals", sources=(), how="empty"),
        ),
        checkpoint_ids={},
        markers={},
        dry_run=True,
    )
    preview = state_preview(move)
    assert (preview.keys, preview.bytes) == (12, 320)
    assert [(r.task, r.from_tasks, r.how) for r in preview.transfers][:2] == [
        ("Partition_0-0-4", ("Partition_0-0-4",), "moved"),
        ("Partition_0-1-4", ("Partition_0-0-4",), "moved"),
    ]


def test_the_page_reads_a_page_of_batches_and_of_data_quality_runs(tmp_path):
    from tests.unit.test_maintenance import finish_run

    config, store = job(tmp_path, factor=2)
    record_batches(store, JobCoordinator(config, store, Inputs()), 4, 7)  # batches 1..10
    for n in range(1, 14):
        finish_run(store, tmp_path / "reports", n, job=config.job_name)
    view = build_view(config, store, Inputs(), limit=4)
    assert [b["batch_id"] for b in view.batches] == [7, 8, 9, 10] and view.older_batches == 7
    assert len(view.quality_runs) == 10 and view.quality_runs[0]["run"] == "run0013" and view.older_runs == 4
    page = render(view)
    assert "id=batches-older href='?before=7#batches'" in page and "batches-newest" not in page
    assert "id=runs-older href='?runs_before=4#quality'" in page
    older = build_view(config, store, Inputs(), limit=4, before=7, runs_before=4)
    assert [b["batch_id"] for b in older.batches] == [3, 4, 5, 6] and older.older_batches == 3
    assert [r["run"] for r in older.quality_runs] == ["run0003", "run0002", "run0001"] and older.older_runs is None
    assert older.quality["run"] == "run0013"  # the card still says the latest verdict
    assert all(t.rate is not None for t in older.tasks)  # rates of the latest batches, whatever the page
    page = render(older)
    assert "id=batches-newest href='?runs_before=4#batches'" in page and "runs-older" not in page


def test_the_page_shows_each_batchs_freshness_and_the_last_hours_percentiles(tmp_path):
    import json
    import time

    from elasticity.views.jobview import metrics_page

    config, store = job(tmp_path, factor=2)  # batches 1..3, recorded without freshness (no timestamped record)
    now = int(time.time() * 1000)
    for b, (oldest, newest) in zip((4, 5), [(1_500, 300), (95_000, 42_000)], strict=True):
        summary = {**store.metrics("bench-ui", limit=1)[0], "batch_id": b, "freshness_ms": {"oldest": oldest, "newest": newest}}
        store.record_metrics("bench-ui", b, 1, json.dumps(summary), freshness=summary["freshness_ms"])
    view = build_view(config, store, Inputs(), now_ms=now)
    f = view.freshness
    assert f is not None and (f.batches, f.oldest_p50, f.oldest_p99, f.newest_p50, f.newest_p99) == (
        2,
        1_500,
        95_000,
        300,
        42_000,
    )
    page = render(view)
    card = re.search(r"<div class=\"v\" id=freshness>(.*?)</div></div>", page, re.S)
    assert card and "1.5 s / 1.6 min" in card[1] and "newest record 300 ms / 42.0 s; 2 batches" in card[1]
    cells = re.findall(r"<td class='num freshness'>([^<]*)</td>", page)
    assert cells == ["1.6 min / 42.0 s", "1.5 s / 300 ms", "-", "-", "-"]  # newest batch first
    assert build_view(config, store, Inputs(), now_ms=now + 2 * 3_600_000).freshness is None  # an hour on: none
    api = metrics_page(store, "bench-ui", limit=2)
    assert [b["freshness_ms"] for b in api["batches"]] == [{"oldest": 1_500, "newest": 300}, {"oldest": 95_000, "newest": 42_000}]
    assert api["freshness"] == {"batches": 2, "oldest_p50": 1_500, "oldest_p99": 95_000, "newest_p50": 300, "newest_p99": 42_000}
    assert api["older"] == 4


def test_the_page_lists_each_batchs_attempt_and_every_failed_attempt_whichever_worker_ran_it(tmp_path):
    config, store = job(tmp_path, factor=2)
    job_name = config.job_name
    for n, (run, attempt) in enumerate([("manual__a", 1), ("manual__b", 1), ("manual__b", 2)]):
        store.clock = lambda n=n: 1_000 + n
        store.record_failure(job_name, run_id=run, attempt=attempt, task="run_batches", error=f"superseded {run} {attempt}")
    view = build_view(config, store, Inputs())
    assert [(f["run_id"], f["attempt"]) for f in view.failures] == [("manual__b", 2), ("manual__b", 1), ("manual__a", 1)]
    page = render(view)
    assert page.count("<td><code>superseded manual__") == 3 and "<table id=failures>" in page
    assert page.count("<td class=owner>") == len(view.batches)  # each batch's attempt (its lease owner) where known


def test_the_history_shows_a_replay_like_a_rescale_with_its_time_and_starts(tmp_path):
    from elasticity.batch.coordinator.replayer import replay
    from elasticity.checkpoint.replay import ReplayFrom

    config, store = job(tmp_path, factor=2)
    replay(JobCoordinator(config, store, Inputs()), ReplayFrom(timestamp_ms=None), reason="a bug fixed", owner="op")
    view = build_view(config, store, Inputs())
    row = view.rescales[-1]
    assert row["origin"] == "replay" and "replay from the earliest retained offset" in row["reason"]
    assert row["replay"]["outputs"] == "new-version" and row["replay"]["starts"]["kafka.orders.0"] == 0
    page = render(view)
    assert "<h2>Rescales and replays</h2>" in page and "<span class='badge warn'>replay</span>" in page
    assert "kafka.orders.7@0" in page
