"""The collector's ``/metrics``: every series typed and documented, units never mixed under one name, no unlabelled
zero beside labelled series, and the build and spool-cap gauges an alert needs."""

from __future__ import annotations

import importlib.metadata
import re
import socket
from pathlib import Path

from inferensics.collector.service import engine_decoder
from inferensics.collector.service.config import load_config
from inferensics.collector.service.metrics import LABELS, ROW_REASONS, Metrics
from inferensics.collector.service.state import build_state
from inferensics.schema.migrations import LATEST_VERSION
from inferensics.schema.store import Store

README = Path(__file__).resolve().parents[3] / "deploy" / "README.md"


def _samples(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def test_a_labelled_counter_has_no_unlabelled_zero_series() -> None:
    """`rejected_total 0` was printed until the first reason, then only `{reason=...}` series: the unlabelled one
    went stale and a dashboard summing the metric saw a series vanish."""
    metrics = Metrics()
    text = metrics.render()
    for name in LABELS:
        assert f"inferensics_collector_{name}_total" not in _samples(text), name
        assert f"# TYPE inferensics_collector_{name}_total counter" in text
    assert _samples(text)["inferensics_collector_received_spans_total"] == 0  # an unlabelled counter starts at 0
    metrics.inc("dropped", 2, label="truncated_value")
    assert _samples(metrics.render())['inferensics_collector_dropped_total{reason="truncated_value"}'] == 2


def test_rejections_say_whether_they_count_requests_or_rows() -> None:
    """`rejected_total` mixed HTTP requests (spool_full, unauthorized) with rows the engine refused (invalid_row):
    its sum meant nothing. Each series now carries unit="request" or unit="row"; the reason label is unchanged."""
    metrics = Metrics()
    metrics.inc("rejected", label="spool_full")
    metrics.inc("rejected", label="unauthorized")
    metrics.inc("rejected", 5, label="invalid_row")
    metrics.inc("rejected", 2, label="out_of_range_time")
    samples = _samples(metrics.render())
    name = "inferensics_collector_rejected_total"
    assert samples[f'{name}{{reason="spool_full",unit="request"}}'] == 1
    assert samples[f'{name}{{reason="unauthorized",unit="request"}}'] == 1
    assert samples[f'{name}{{reason="invalid_row",unit="row"}}'] == 5
    assert samples[f'{name}{{reason="out_of_range_time",unit="row"}}'] == 2
    assert metrics.get("rejected", "invalid_row") == 5  # the in-process names are the same


def test_every_reason_the_engine_rejects_rows_for_is_a_row_reason() -> None:
    source = Path(engine_decoder.__file__).read_text(encoding="utf-8")
    keys = set(re.findall(r"\.rejected\[([^\]]+)\]", source))
    assert keys, "the engine decoder counts rejected rows as out.rejected[reason]"
    reasons = {eval(k, vars(engine_decoder)) for k in keys}  # a literal or a module constant
    assert reasons <= ROW_REASONS, reasons - ROW_REASONS


def test_build_info_and_start_time_identify_the_process() -> None:
    samples = _samples(Metrics().render())
    version = importlib.metadata.version("inferensics")
    labels = f'version="{version}",schema="{LATEST_VERSION}",hostname="{socket.gethostname()}"'
    info = f"inferensics_collector_build_info{{{labels}}}"
    assert samples[info] == 1
    assert samples["inferensics_collector_start_time_seconds"] > 1.7e9


def _service_metrics(tmp_path: Path) -> str:
    config = load_config({"spool_dir": str(tmp_path / "spool"), "spool_max_bytes": 1 << 20}, environ={})
    dsn = f"chdb://{tmp_path / 'db'}"
    state = build_state(config, open_store=lambda: Store.open(dsn), start_writer=False)
    try:
        state.metrics.inc("rejected", label="spool_full")
        state.metrics.inc("rejected", label="invalid_row")
        state.metrics.inc("dropped", label="truncated_value")
        state.metrics.inc("writer_seconds", 0.5, label="parse")
        return state.metrics.render()
    finally:  # the writer never started: close what was opened
        state.ingest.close()
        state.spool.close()


def test_the_spool_cap_is_a_gauge(tmp_path: Path) -> None:
    """An alert on "spool 80 % full" had to hard-code the cap."""
    samples = _samples(_service_metrics(tmp_path))
    assert samples["inferensics_collector_spool_max_bytes"] == 1 << 20
    assert samples["inferensics_collector_spool_bytes"] == 0


def test_every_series_is_typed_and_documented_in_deploy_readme(tmp_path: Path) -> None:
    text = _service_metrics(tmp_path)
    typed = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, flags=re.MULTILINE))
    for sample in _samples(text):
        base = sample.split("{")[0]
        family = re.sub(r"_(bucket|sum|count)$", "", base) if base not in typed else base
        assert family in typed, sample
    section = README.read_text(encoding="utf-8").split("## Metrics", 1)[1].split("\n## ", 1)[0]
    documented = dict(re.findall(r"^\| `(inferensics_collector_\w+)` \| (\w+) \|", section, flags=re.MULTILINE))
    assert documented == typed, (set(typed) ^ set(documented), "deploy/README.md, section Metrics")


def test_large_values_are_written_in_full() -> None:
    """Values went through `{:g}`: 1,234,567 written rows read 1.23457e+06, an 8 GiB spool cap 8.58993e+09."""
    metrics = Metrics()
    metrics.inc("written_rows", 1_234_567)
    metrics.gauge("spool_max_bytes", "cap", lambda: float(8 << 30))
    metrics.observe_batch(0.125)
    samples = _samples(metrics.render())
    assert "inferensics_collector_written_rows_total 1234567\n" in metrics.render()
    assert samples["inferensics_collector_spool_max_bytes"] == 8 << 30
    assert samples["inferensics_collector_batch_latency_seconds_sum"] == 0.125


def _readme_row(series: str) -> str:
    section = README.read_text(encoding="utf-8").split("## Metrics", 1)[1].split("\n## ", 1)[0]
    return next(line for line in section.splitlines() if line.startswith(f"| `inferensics_collector_{series}_total`"))


def test_every_reason_a_decoder_counts_is_in_deploy_readme() -> None:
    """The README's metrics table lacked ``duplicate_key`` (dropped) and said nothing of the query listing's
    errors; a reason added to the decoders must be added to the table too."""
    from inferensics.collector.service import otlp_sql

    dropped = {"sdk_attributes", "sdk_events", otlp_sql.TRUNCATED_VALUE, otlp_sql.UNSUPPORTED_VALUE,
               otlp_sql.TOO_MANY_ENTRIES, otlp_sql.DUPLICATE_KEY}  # fmt: skip
    row = _readme_row("dropped")
    assert {r for r in dropped if f"`{r}`" not in row} == set()
    row = _readme_row("rejected")
    assert {r for r in ROW_REASONS if f"`{r}`" not in row} == set()
    assert "listing" in _readme_row("query_errors")
