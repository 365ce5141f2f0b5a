"""The request drill-down page against the seeded service."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path

import pytest
import torch
import torch._dynamo

from inferensics.collector.host import SdkConfig, instrument
from inferensics.dashboard._internal.kernel_decisions import NONE_RECORDED, REASONS_MISSING
from tests.collector.service.harness import INGEST, READ, new_service
from tests.dashboard.apptest import assert_clean, metric, open_page, texts
from tests.dashboard.conftest import SeededService
from tests.dashboard.seed import (
    ARTIFACT,
    DRILL_ID,
    INPUTS_BLOB,
    INPUTS_SHA,
    KERNELS,
    LLAMA,
    MISTRAL,
    OUTPUT_CODE,
    PROVIDERS,
    RECORDED_PROVIDERS,
    STORM_REASON,
    SeedFacts,
)
from tests.polling import poll

PAGE = "views/request.py"
pytestmark = pytest.mark.slow


def test_drilldown_shows_the_request_its_kernels_code_and_inputs(seeded: SeededService) -> None:
    at = open_page(seeded, PAGE, **{"drill.request_id": DRILL_ID})
    assert_clean(at)
    drill = next(r for r in seeded.facts.requests if r.request_id == DRILL_ID)
    assert metric(at, "Outcome") == drill.outcome == "hit"
    assert metric(at, "Latency") == f"{drill.latency_ms:,.1f} ms"
    assert metric(at, "Guards") == drill.guard_outcome
    shown = texts(at)
    assert "Inputs captured" in shown
    assert INPUTS_SHA in shown
    assert f"{len(INPUTS_BLOB):,} bytes" in shown
    # Not replayed yet, inputs captured: the page gives the replay command to run (a real command now).
    assert any(c.value.startswith(f"inferensics replay {DRILL_ID} --service {seeded.url} ") for c in at.code)
    assert "baseline" in shown  # the bundle's name, from the bundles table

    graphs = next(d.value for d in at.dataframe if "graph_key" in d.value.columns)
    assert graphs["artifact_id"].tolist() == [ARTIFACT]
    # Calls, host time and where the graph comes from first; the 64-digit keys after them.
    assert list(graphs.columns[:4]) == ["position", "calls", "graph_us", "code_location"]
    # Which kernel provider computed each registry op of the graph (its compile's decisions).
    assert "Kernel providers" in shown
    assert all(f"`{p}" in shown for p in PROVIDERS)
    # The compile record names the providers, the store holds no decision rows for them: the page says the reasons
    # are missing, not that the request "called no op of the registry" under the list of its ops (one section).
    assert REASONS_MISSING in shown
    assert NONE_RECORDED not in shown
    assert "Kernel-registry decisions" not in shown
    kernels = next(d.value for d in at.dataframe if "post_grad_nodes" in d.value.columns)
    by_name = {row["kernel_name"]: row for _, row in kernels.iterrows()}
    assert set(by_name) == {k[0] for k in KERNELS}
    for name, _, _, lines in KERNELS:
        assert list(by_name[name]["source_lines"]) == list(lines)
    # Sampled timings: the seed gives kernel n a total of 100 × (n + 1) µs.
    assert [by_name[k[0]]["total_us"] for k in KERNELS] == [100.0, 200.0, 300.0]

    # The whole generated code is shown (st.code trims the final newline).
    assert [c.value for c in at.code if c.language == "python"] == [OUTPUT_CODE.strip()]
    code_map = next(d.value for d in at.dataframe if "defined_at" in d.value.columns)
    code_lines = OUTPUT_CODE.splitlines()
    located = {row["kernel_name"]: row for _, row in code_map.iterrows()}
    assert set(located) == {k[0] for k in KERNELS}
    for name, row in located.items():
        launched = list(row["launched_at"])
        assert launched, name
        assert all(name in code_lines[n - 1] for n in launched)
    # Triton kernels are defined in the file; the extern matmul is only launched.
    for name in ("triton_poi_fused_addmm_gelu_0", "triton_red_fused_softmax_1"):
        assert code_lines[int(located[name]["defined_at"]) - 1].startswith(f"{name} = async_compile")
    assert math.isnan(located["extern_kernels.mm"]["defined_at"])


def test_drilldown_of_a_failed_request_shows_its_error(seeded: SeededService) -> None:
    failed = next(r for r in seeded.facts.requests if r.status == "error")
    at = open_page(seeded, PAGE, **{"drill.request_id": failed.request_id})
    assert_clean(at)
    assert metric(at, "Status") == "error"
    assert any(failed.error in str(e.value) for e in at.error)
    assert "Inputs not captured" in texts(at)


def test_drilldown_of_an_unknown_id_says_so(seeded: SeededService) -> None:
    at = open_page(seeded, PAGE, **{"drill.request_id": "no-such-request"})
    assert_clean(at)
    said = [str(w.value) for w in at.warning if "no-such-request" in str(w.value)]
    assert said
    # The service's words only: no HTTP status, no query name (issue 20: "400 request_detail: ...").
    assert said[0].startswith("no request 'no-such-request'"), said
    assert not at.error


def test_drilldown_reads_the_request_id_from_the_link(seeded: SeededService) -> None:
    at = open_page(seeded)
    at.query_params["request_id"] = DRILL_ID
    at.switch_page(PAGE).run()
    assert_clean(at)
    assert at.text_input(key="drill.request_id").value == DRILL_ID
    assert metric(at, "Outcome") == "hit"


def test_drilldown_of_a_recompiling_request_shows_seconds_and_its_reasons(seeded: SeededService) -> None:
    storm = next(r for r in seeded.facts.requests if r.outcome == "recompile")
    at = open_page(seeded, PAGE, **{"drill.request_id": storm.request_id})
    assert_clean(at)
    assert metric(at, "Outcome") == "recompile"
    # Durations above a second are shown in seconds (3,100.0 ms did not fit its cell on a laptop screen).
    assert metric(at, "Latency") == f"{storm.latency_ms / 1000:,.2f} s" == "3.10 s"
    assert metric(at, "Compile in request") == f"{storm.compile_ms / 1000:,.2f} s" == "3.00 s"
    assert STORM_REASON in texts(at)


def test_drilldown_shows_the_replay_verdict(seeded: SeededService) -> None:
    """A replay_results row (as ``inferensics replay`` records it) appears as the verdict on the page."""
    import time
    from datetime import UTC, datetime

    from inferensics.collector.host.otlp_exporter import OtlpExporter
    from inferensics.schema.events import ReplayResultEvent
    from tests.collector.service.harness import INGEST

    rid = next(r.request_id for r in seeded.facts.requests if r.request_id != DRILL_ID)
    row = ReplayResultEvent(ts=datetime.now(UTC), replay_id="r1", request_id=rid, attribution="decomposition",
                            op="aten.silu", fx_node="silu", kernel="triton_poi_fused_mul_silu_3",
                            source_file="decoder.py", source_line=154, source_text="out = self.down(F.silu(x))",
                            detail="decomposition of aten.silu", device_name="NVIDIA H200",
                            verdict_json='{"summary": "silu_mul diverges: x*sigmoid(x) decomposed"}')  # fmt: skip
    exporter = OtlpExporter(seeded.url, host="replayer", token=INGEST)
    exporter.export_records([row])
    exporter.flush()
    exporter.shutdown()
    client = seeded.service.client()
    deadline = time.monotonic() + 60
    while not client.query("request_replays", request_id=rid).height and time.monotonic() < deadline:
        time.sleep(0.3)
    at = open_page(seeded, PAGE, **{"drill.request_id": rid})
    assert_clean(at)
    shown = texts(at)
    assert "Replay verdict: decomposition" in shown
    assert "aten.silu" in shown
    assert "decoder.py:154" in shown
    assert "triton_poi_fused_mul_silu_3" in shown
    # The verdict's sentence for people (for an inputs verdict: the error every path raises) is shown too.
    assert r"silu\_mul diverges: x\*sigmoid\(x\) decomposed" in shown


def _scale(x: torch.Tensor) -> torch.Tensor:
    return torch.relu(x) * 3 + 1


@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_a_profiled_requests_whole_graph_calls_are_not_listed_as_kernels(tmp_path: Path) -> None:
    """A real compiled function behind the host SDK, every request profiled, exported to a service: the page's
    kernels table holds the artifact's kernels with their source lines, and Inductor's
    ``## Call CompiledFxGraph <key> ##`` range (no backend, no source line) is shown as what it is, the graph's
    whole-call time, in its own table tied to the graph above it."""
    service = new_service(tmp_path).start()
    try:
        torch._dynamo.reset()
        tracker = instrument(
            service_url=service.url, token=INGEST, host="h", model="m", config=SdkConfig(sample_rate=1.0)
        )
        try:
            compiled = tracker.compile(_scale)
            for rid in ("p-0", "p-1"):
                with tracker.request(rid) as req:
                    req.set_output(compiled(torch.randn(32)))
        finally:
            tracker.shutdown()
            torch._dynamo.reset()
        client = service.client()
        counts = (
            "SELECT (SELECT count() FROM requests) AS r, (SELECT count() FROM kernels) AS k, "
            "(SELECT count() FROM kernel_timings WHERE request_id = 'p-1') AS t"
        )
        assert poll(lambda: client.sql(counts).row(0), lambda n: n[0] == 2 and min(n) > 0, timeout=60)[0] == 2
        now = datetime.now(UTC).replace(second=0, microsecond=0)
        at = open_page(SeededService(service, READ, SeedFacts(now=now)), PAGE, **{"drill.request_id": "p-1"})
        assert_clean(at)
        graphs = next(d.value for d in at.dataframe if "compile_cache_status" in d.value.columns)
        kernels = next(d.value for d in at.dataframe if "post_grad_nodes" in d.value.columns)
        assert kernels["kernel_name"].tolist() == ["cpp_fused_add_mul_relu_0"]
        assert kernels["kernel_backend"].tolist() == ["cpp"]
        assert all(len(lines) for lines in kernels["source_lines"])  # provenance: the user's source lines
        calls = next(d.value for d in at.dataframe if "fx_cache_key" in d.value.columns)
        assert calls["position"].tolist() == [0]
        assert calls["artifact_id"].tolist() == graphs["artifact_id"].tolist()
        assert calls["calls"].tolist() == [1]
        assert calls["total_us"].tolist()[0] > 0
        assert all(key for key in calls["fx_cache_key"])
        assert "Whole compiled-graph calls (profiled)" in texts(at)
        # Served with no traffic class or shape: the header read "traffic ****" and "shape ` `" (raw Markdown)
        header = next(line for line in texts(at).splitlines() if line.startswith("**m** on `h`"))
        assert " · traffic – · " in header, header
        assert header.endswith(" UTC · shape –"), header
        assert "****" not in header
    finally:
        service.stop()


def test_a_multi_line_error_is_shown_as_written(tmp_path: Path) -> None:
    """A request's error as the SDK recorded it, through a real service: Markdown ran a multi-line error
    (Dynamo's, with its user-code trace) into one paragraph and read ``*args, **kwargs`` as emphasis. The alert
    holds its first line, escaped; the whole text follows as written."""
    service = new_service(tmp_path).start()
    error = "bad call fn(*args, **kwargs) in _private_name_\n  File 'model.py', line 3\n    fn(*args)\n    ^^^^"
    try:
        tracker = instrument(service_url=service.url, token=INGEST, host="h", model="m")
        try:
            with pytest.raises(RuntimeError), tracker.request("e-1"):
                raise RuntimeError(error)
        finally:
            tracker.shutdown()
        client = service.client()
        assert poll(lambda: client.sql("SELECT count() FROM requests").item(), lambda n: n == 1, timeout=60) == 1
        now = datetime.now(UTC).replace(second=0, microsecond=0)
        at = open_page(SeededService(service, READ, SeedFacts(now=now)), PAGE, **{"drill.request_id": "e-1"})
        assert_clean(at)
        alert = next(str(e.value) for e in at.error if "Error:" in str(e.value))
        assert alert == r"**Error:** RuntimeError: bad call fn\(\*args, \*\*kwargs\) in \_private\_name\_"
        assert [c.value for c in at.code] == [f"RuntimeError: {error}"]
    finally:
        service.stop()


def test_the_bundle_a_request_ran_links_to_its_manifest_and_report(seeded: SeededService) -> None:
    """The headline named the bundle (name and id) with no way to it: its id now opens the Bundles page on that
    bundle (``bundles?bundle_id=``), the page of the navigation that reads the parameter."""
    from inferensics.dashboard._internal.links import BUNDLE_ID_PARAM, BUNDLES_PATH
    from inferensics.dashboard.navigation import BY_URL

    request = next(r for r in seeded.facts.requests if r.request_id == DRILL_ID)
    at = open_page(seeded, PAGE, **{"drill.request_id": DRILL_ID})
    assert_clean(at)
    assert f"](./{BUNDLES_PATH}?{BUNDLE_ID_PARAM}={request.bundle_id})" in texts(at)
    assert BY_URL[BUNDLES_PATH].file == "views/bundles.py"


def test_each_kernel_provider_decision_is_listed_once(seeded: SeededService) -> None:
    """A compile record holds one ``op=provider`` per op signature (``kernel_decisions`` has a row for each), so
    the page read ``rms_norm=triton, rms_norm=triton, ...``. It lists each decision once, with how many
    signatures it was chosen for, in the list and in the graphs table; the stored rows keep every signature."""
    assert RECORDED_PROVIDERS.count("rms_norm=triton") == 2  # the seed stores it as the assembler does
    at = open_page(seeded, PAGE, **{"drill.request_id": DRILL_ID})
    assert_clean(at)
    (listed,) = [str(m.value) for m in at.markdown if str(m.value).startswith("**Kernel providers**")]
    assert listed.splitlines()[1:] == [
        "- graph 0: `paged_decode_attention=triton`, `rms_norm=triton ×2`, `silu_mul=triton`"
    ]
    graphs = next(d.value for d in at.dataframe if "kernel_providers" in d.value.columns)
    assert [list(v) for v in graphs["kernel_providers"]] == [
        ["paged_decode_attention=triton", "rms_norm=triton ×2", "silu_mul=triton"]
    ]
    stored = seeded.service.client().sql(
        f"SELECT kernel_providers FROM compiles WHERE model = '{LLAMA}' AND trigger = 'first' LIMIT 1"
    )
    assert list(stored.item(0, 0)) == list(RECORDED_PROVIDERS)


def _record_replay(seeded: SeededService, **fields: object) -> None:
    """A replay_results row, as ``inferensics replay`` records it (OTLP to the service), once queryable."""
    from inferensics.collector.host.otlp_exporter import OtlpExporter
    from inferensics.schema.events import ReplayResultEvent

    row = ReplayResultEvent.model_validate({"ts": datetime.now(UTC), "replay_id": "r-inputs", **fields})
    exporter = OtlpExporter(seeded.url, host="replayer", token=INGEST)
    exporter.export_records([row])
    exporter.flush()
    exporter.shutdown()
    client = seeded.service.client()
    rid = row.request_id
    assert poll(lambda: client.query("request_replays", request_id=rid).height, lambda n: n > 0, timeout=60)


def test_an_inputs_verdict_names_the_input_without_empty_fields(seeded: SeededService) -> None:
    """An ``inputs`` verdict names an input, no op or kernel: it read "op – · node – ... kernel –". It now reads
    by what it names (``input k_cache``), the node and line it met, and nothing that is empty."""
    # A failed request no other test opens: the page caches its queries for a while, an empty replay list too.
    rid = [r.request_id for r in seeded.facts.requests if r.status == "error"][-2]
    _record_replay(seeded, request_id=rid, attribution="inputs", detail="input k_cache", fx_node="index_put",
                   source_file="decoder.py", source_line=88, source_text="k_cache[pos] = k", device_name="cpu",
                   verdict_json='{"summary": "input k_cache holds 3 values outside [0, 63]"}')  # fmt: skip
    at = open_page(seeded, PAGE, **{"drill.request_id": rid})
    assert_clean(at)
    (verdict,) = [str(m.value) for m in at.markdown if "Replay verdict" in str(m.value)]
    assert verdict.startswith("**Replay verdict: inputs** · input `k_cache` · node `index_put` · ")
    assert "`decoder.py:88` `k_cache[pos] = k`" in verdict
    for empty in (" op ", "kernel", "–"):
        assert empty not in verdict, verdict
    assert " · on cpu " in verdict


def test_a_verdict_shows_the_non_finite_values_of_each_path(seeded: SeededService) -> None:
    """A replay verdict counts the NaN and inf of each path's output (fp64, eager, the served path; its evidence's
    ``nonfinite``), which tells a model that computes them (fp64 too) from a compiler that makes them: the page
    showed the verdict without them. It shows each path's counts, fp64 first."""
    # A failed request no other test opens: the page caches its queries for a while, an empty replay list too.
    rid = [r.request_id for r in seeded.facts.requests if r.status == "error"][-3]
    nonfinite = {
        "eager float32": {"nan": 8, "inf": 0, "total": 8},
        "fp64": {"nan": 6, "inf": 2, "total": 8},
        "served": {"nan": 0, "inf": 0, "total": 0},
    }
    verdict = {"category": "inputs", "summary": "non-finite output in fp64 and eager (the served output has none)",
               "evidence": {"serving_dtype": "float32", "nonfinite": nonfinite, "rungs": []}}  # fmt: skip
    _record_replay(seeded, request_id=rid, attribution="inputs", op="aten.sqrt", fx_node="sqrt", device_name="cpu",
                   verdict_json=json.dumps(verdict, sort_keys=True))  # fmt: skip
    at = open_page(seeded, PAGE, **{"drill.request_id": rid})
    assert_clean(at)
    (counts,) = [str(m.value) for m in at.markdown if "Non-finite values per path" in str(m.value)]
    assert counts == "**Non-finite values per path:** fp64 **6 NaN, 2 inf** · eager float32 **8 NaN** · served none"


def test_the_replay_hint_urges_no_fault_hunt_on_a_request_that_completed_fine(seeded: SeededService) -> None:
    """A request that completed fine read "Not replayed yet. Name the fault: capture its inputs first". Without
    captured inputs it now says nothing of replay; with them (a sampled request), how to replay it if wanted; a
    failed request without them, that it cannot be replayed."""
    fine = next(
        r.request_id for r in seeded.facts.requests if r.status == "ok" and not r.capture_blob and r.model == MISTRAL
    )
    at = open_page(seeded, PAGE, **{"drill.request_id": fine})
    assert_clean(at)
    shown = texts(at)
    assert "replay" not in shown.lower(), shown
    assert "Name the fault" not in shown, shown

    at = open_page(seeded, PAGE, **{"drill.request_id": DRILL_ID})  # completed fine, inputs captured
    assert_clean(at)
    (hint,) = [str(i.value) for i in at.info if "replay" in str(i.value)]
    assert "Name the fault" not in hint
    assert "completed without a fault" in hint
    assert any(c.value.startswith(f"inferensics replay {DRILL_ID} --service ") for c in at.code)

    failed = [r.request_id for r in seeded.facts.requests if r.status == "error" and not r.capture_blob]
    at = open_page(seeded, PAGE, **{"drill.request_id": failed[-1]})  # never replayed (the one before it is)
    assert_clean(at)
    assert any("Cannot be replayed" in str(i.value) and "not captured" in str(i.value) for i in at.info), at.info
