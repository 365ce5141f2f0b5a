"""``inferensics requests``: the newest (failing) requests from an embedded store and through a running service
with a read-only token, and one line for each bad input."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from inferensics.cli.app import app
from inferensics.cli.requests_commands import REQUEST_PAGE
from inferensics.cli.service_records import record_through_service
from inferensics.collector.client import ServiceError
from inferensics.dashboard._internal.links import REQUEST_ID_PARAM, REQUEST_PATH
from inferensics.schema.events import RequestEvent
from inferensics.schema.store import Store
from tests.analytics.failing_requests import END, FAILING_NEWEST_FIRST, T, failing_requests
from tests.collector.service.harness import ADMIN, INGEST, READ, new_service
from tests.polling import poll
from tests.seeding import seed

runner = CliRunner()
ENV = {"COLUMNS": "250"}
WINDOW = ["--since", f"{T:%Y-%m-%dT%H:%M}", "--until", f"{END:%Y-%m-%dT%H:%M}"]


@pytest.fixture
def seeded(store: Store) -> str:
    """The failing requests' store; its DSN."""
    seed(store, events=failing_requests())
    return f"chdb://{store.dsn.path}?database={store.database}"


def _table_rows(output: str) -> list[list[str]]:
    return [[c.strip() for c in line.split("│")[1:-1]] for line in output.splitlines() if line.startswith("│")]


def _expected_rows(start: datetime) -> list[list[str]]:
    minutes = {e.request_id: e for e in failing_requests(start)}
    return [
        [rid, f"{minutes[rid].ts:%Y-%m-%d %H:%M:%S}", model, pool, minutes[rid].host, kind, minutes[rid].outcome,
         f"{minutes[rid].latency_ms:,.1f}", detail]
        for rid, model, pool, kind, detail in FAILING_NEWEST_FIRST
    ]  # fmt: skip


def test_failing_requests_of_an_embedded_store(seeded: str) -> None:
    res = runner.invoke(app, ["requests", "--failing", "--model", "m", *WINDOW, "--dsn", seeded], env=ENV)
    assert res.exit_code == 0, res.output
    assert _table_rows(res.output) == _expected_rows(T)
    tail = res.output.strip().splitlines()[-3:]
    assert tail == [
        "failing requests (model m, 2026-03-03 12:00:00 to 2026-03-03 13:00:00 UTC): all 7 (error 3, "
        "non-finite output 2, eager fallback 2)",
        "open one: inferensics requests --id r-fallback-no-reason, or the dashboard's request page "
        "/request?request_id=r-fallback-no-reason",
        "none listed can be replayed: replay needs a request served from a bundle with its inputs captured (serve "
        "from a bundle with SdkConfig(capture=CaptureRules(enabled=True)))",
    ]


def test_the_limit_and_the_pool_narrow_the_list_and_the_counts_say_how_many_are_left(seeded: str) -> None:
    res = runner.invoke(app, ["requests", "--failing", *WINDOW, "--limit", "2", "--dsn", seeded], env=ENV)
    assert res.exit_code == 0, res.output
    assert [r[0] for r in _table_rows(res.output)] == ["r-fallback-no-reason", "r-other-model"]
    assert "): newest 2 of 8 (error 4, non-finite output 2, eager fallback 2)" in res.output
    res = runner.invoke(app, ["requests", "--failing", "--hw-pool", "p2", *WINDOW, "--dsn", seeded], env=ENV)
    assert [r[0] for r in _table_rows(res.output)] == ["r-inf-and-fallback", "r-nan"]
    assert "(hardware pool p2, 2026-03-03 12:00:00 to" in res.output


def test_without_failing_ok_requests_are_listed_too(seeded: str) -> None:
    res = runner.invoke(app, ["requests", *WINDOW, "--dsn", seeded], env=ENV)
    assert res.exit_code == 0, res.output
    rows = _table_rows(res.output)
    assert (rows[0][0], rows[0][5], rows[0][6], rows[0][8]) == ("r-ok-2", "ok", "recompile", "")
    assert len(rows) == 10
    assert "all 10 (error 4, non-finite output 2, eager fallback 2, ok 2)" in res.output


def test_no_match_is_one_line(seeded: str) -> None:
    later = ["--since", f"{END:%Y-%m-%dT%H:%M}", "--until", f"{END + timedelta(hours=1):%Y-%m-%dT%H:%M}"]
    res = runner.invoke(app, ["requests", "--failing", "--model", "other", *later, "--dsn", seeded], env=ENV)
    assert res.exit_code == 0, res.output
    assert (
        res.output.strip()
        == "no failing requests matched (model other, 2026-03-03 13:00:00 to 2026-03-03 14:00:00 UTC)"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--limit", "0"], "error: --limit 0: list at least 1 and at most 10,000 requests"),
        (["--limit", "10001"], "error: --limit 10001: list at least 1 and at most 10,000 requests"),
        (["--since", "yesterday"], "error: --since 'yesterday': not a time; give a time ago (30m, 6h, 7d) or an ISO "
                                   "8601 time in UTC (2026-03-03 or 2026-03-03T12:00)"),
        (["--until", "2026-13-01"], "error: --until '2026-13-01': not a time;"),
        (["--since", "2026-03-04", "--until", "2026-03-03"],
         "error: --since 2026-03-04 00:00:00 is not before --until 2026-03-03 00:00:00 (UTC)"),
        (["--model", " "], "error: --model: empty; give a value, or leave --model out for all"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_opens_no_store(args: list[str], message: str, tmp_path: Path) -> None:
    store = tmp_path / "store"
    res = runner.invoke(app, ["requests", "--failing", *args, "--dsn", f"chdb://{store}"], env=ENV)
    assert res.exit_code == 2, res.output
    assert len(res.output.strip().splitlines()) == 1, res.output
    assert res.output.strip().startswith(message), res.output
    assert not store.exists()


def test_an_unknown_model_names_the_known_ones(seeded: str) -> None:
    """A typo must not look like a model that never failed (the analytics' rule for every filter)."""
    res = runner.invoke(app, ["requests", "--failing", "--model", "mm", *WINDOW, "--dsn", seeded], env=ENV)
    assert res.exit_code == 2, res.output
    assert res.output.strip() == "error: unknown model 'mm': it matches nothing in the store; known: 'm', 'other'"


def test_the_request_page_path_is_the_dashboards() -> None:
    assert f"{REQUEST_PATH}?{REQUEST_ID_PARAM}=" == REQUEST_PAGE


def test_through_a_running_service_with_a_read_only_token(tmp_path: Path) -> None:
    """The list comes from named queries: the read token lists the requests, though it may not run SQL."""
    start = (datetime.now(UTC) - timedelta(hours=2)).replace(second=0, microsecond=0)
    with new_service(tmp_path) as svc:
        ok, line = record_through_service(svc.url, INGEST, failing_requests(start), RequestEvent.TABLE.name)
        assert ok, line
        rows = lambda: svc.client(ADMIN).status()["store"]["row_counts"][RequestEvent.TABLE.name]  # noqa: E731
        assert poll(rows, lambda n: n >= 11, timeout=60, interval=0.2) == 11
        with pytest.raises(ServiceError):
            svc.client(READ).sql("SELECT 1")
        window = ["--since", f"{start:%Y-%m-%dT%H:%M}", "--until", f"{start + timedelta(hours=1):%Y-%m-%dT%H:%M}"]
        args = ["requests", "--failing", "--model", "m", *window, "--service", svc.url, "--token", READ]
        res = runner.invoke(app, args, env=ENV)
        assert res.exit_code == 0, res.output
        assert _table_rows(res.output) == _expected_rows(start)
        assert "all 7 (error 3, non-finite output 2, eager fallback 2)" in res.output
        assert f"open one: inferensics requests --id r-fallback-no-reason --service {svc.url}, or" in res.output
        refused = runner.invoke(app, [*args[:-1], "wrong-token"], env=ENV)
        assert refused.exit_code == 2
        assert len(refused.output.strip().splitlines()) == 1, refused.output
        # A refused filter value reads as from a store (it read "error: POST /api/v1/query/request_list: 400
        # request_list: unknown model ..."): the service's words, without the HTTP plumbing or the query's name.
        typo = runner.invoke(app, [a if a != "m" else "mm" for a in args], env=ENV)
        assert typo.exit_code == 2, typo.output
        assert typo.output.strip() == "error: unknown model 'mm': it matches nothing in the store; known: 'm', 'other'"


def test_one_request_with_its_kernel_providers(store: Store) -> None:
    """``--id``: how one request was served and the providers behind it, a provider that raised named (walk 41 #10:
    no command showed a request's providers)."""
    from tests.dashboard.request_kernels import COMPILED_ID, EAGER_ID, HIT_ID, SIGNATURE, events

    now = datetime.now(UTC).replace(second=0, microsecond=0)
    seed(store, events=events(now))
    dsn = f"chdb://{store.dsn.path}?database={store.database}"
    res = runner.invoke(app, ["requests", "--id", EAGER_ID, "--dsn", dsn], env=ENV)
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[0].startswith(f"request {EAGER_ID}: ")
    assert lines[1].startswith("outcome eager · status ok · ")
    assert lines[2:4] == [
        "output: finite (fingerprinted: no NaN, no inf)",
        "inputs not captured (replay needs them): it passed no inputs to the tracker (tracker.request(inputs=...)), "
        "or they could not be read (counted in its host's stats() as capture_errors): there was nothing to capture",
    ]
    # Each decision that fell back to the reference says so, as the request page's fallback column does.
    fell_back = "fallback: no provider before it could serve this signature"
    assert lines[4:] == [
        f"kernel eager: rms_norm=reference at {SIGNATURE} · {fell_back} · skipped picky: raised RuntimeError: picky "
        "kernel failed; triton: platform cpu not in ['cuda', 'interpreter']",
        "  picky raised and was taken out for that signature",
        f"kernel eager: silu_mul=reference at {SIGNATURE} · {fell_back} · skipped triton: platform cpu not in "
        "['cuda', 'interpreter']",
    ]
    hit = runner.invoke(app, ["requests", "--id", HIT_ID, "--dsn", dsn], env=ENV)
    assert hit.exit_code == 0, hit.output
    assert f"graph 0: {'c' * 16} · 1 calls · providers: none recorded" in hit.output
    assert "kernel graph 0 (traced in an earlier request's compile): rms_norm=inductor" in hit.output
    assert COMPILED_ID not in hit.output
    refused = runner.invoke(app, ["requests", "--id", EAGER_ID, "--failing", "--dsn", dsn], env=ENV)
    assert (refused.exit_code, refused.output.strip()) == (
        2, "error: --id shows one request: --failing narrows a list; leave it out"
    )  # fmt: skip
    missing = runner.invoke(app, ["requests", "--id", "nope", "--dsn", dsn], env=ENV)
    assert missing.exit_code == 2
    assert "no request 'nope' in the store" in missing.output


BATCH_ERROR = RequestEvent(
    request_id="r-batch", ts=T + timedelta(minutes=10), host="h200-b-07", model="m", hw_pool="p1",
    traffic_class="batch", bundle_id="bnd-canary", status="error", outcome="error", error="RuntimeError: boom",
)  # fmt: skip
"""A failing request of another host, traffic class and bundle than the others of the window."""


def test_host_traffic_class_and_bundle_narrow_the_list(store: Store) -> None:
    """Walk 42 (fleet D12): ``requests`` had no ``--host``, ``--traffic-class`` or ``--bundle``, though the named query
    takes them ("what failed on h200-b-07 this morning?" needed the raw query)."""
    seed(store, events=[*failing_requests(), BATCH_ERROR])
    dsn = f"chdb://{store.dsn.path}?database={store.database}"
    listed = {}
    for option, value in (("--host", "h2"), ("--host", "h200-b-07"), ("--traffic-class", "batch"),
                          ("--bundle", "bnd-canary")):  # fmt: skip
        res = runner.invoke(app, ["requests", "--failing", option, value, *WINDOW, "--dsn", dsn], env=ENV)
        assert res.exit_code == 0, res.output
        listed[option, value] = [r[0] for r in _table_rows(res.output)]
        label = option.removeprefix("--").replace("-", " ")
        assert f"failing requests ({label} {value}, 2026-03-03 12:00:00 to" in res.output
    assert listed == {
        ("--host", "h2"): ["r-nan"],
        ("--host", "h200-b-07"): ["r-batch"],
        ("--traffic-class", "batch"): ["r-batch"],
        ("--bundle", "bnd-canary"): ["r-batch"],
    }
    typo = runner.invoke(app, ["requests", "--host", "h3", *WINDOW, "--dsn", dsn], env=ENV)
    assert (typo.exit_code, typo.output.strip().splitlines()[0][:24]) == (2, "error: unknown host 'h3'")
    empty = runner.invoke(app, ["requests", "--bundle", " ", "--dsn", dsn], env=ENV)
    assert empty.output.strip() == "error: --bundle: empty; give a value, or leave --bundle out for all"
    one = runner.invoke(app, ["requests", "--id", "r-batch", "--host", "h1", "--dsn", dsn], env=ENV)
    assert (one.exit_code, one.output.strip()) == (
        2,
        "error: --id shows one request: --host narrows a list; leave it out",
    )


def test_a_narrow_terminal_keeps_id_time_and_host_whole(seeded: str) -> None:
    """Walk 42 (fleet D9): piped (80 columns) the table cut the host and the time (``h200-b-…``, ``2026-12-…``) and
    wrapped the error a word a line. The id, time and host stay whole; the details follow the table, a line each."""
    res = runner.invoke(app, ["requests", "--failing", "--model", "m", *WINDOW, "--dsn", seeded], env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert max(len(line) for line in lines if line[:1] in set("┏┃┡│└")) <= 80, res.output  # the summary lines soft-wrap
    rows: list[list[str]] = []
    for cells in _table_rows(res.output):  # a request's row and its wrapped lines, joined
        if cells[0]:
            rows.append(cells)
        else:
            rows[-1] = [" ".join(filter(None, pair)) for pair in zip(rows[-1], cells, strict=True)]
    assert rows == [[rid, ts, pool, host] for rid, ts, _, pool, host, *_ in _expected_rows(T)], res.output
    expected = _expected_rows(T)
    details = [line for line in lines if line.startswith("r-") and ": " in line]
    assert details == [
        f"{rid}: {kind} · model {model} · outcome {outcome} · {latency} ms" + (f" · {detail}" if detail else "")
        for rid, _, model, _, _, kind, outcome, latency, detail in expected
    ], res.output


def test_a_narrow_terminal_moves_model_and_what_failed_to_the_follow_up_lines(store: Store) -> None:
    """Walk (oncall): at 80 columns, or piped, the demo's failing requests folded the model and what failed into
    5-character pieces (``tiny-`` / ``decod`` / ``er``, ``non-f`` / ``inite``). They follow the table whole, on each
    request's own line, as outcome and latency do."""
    start = T + timedelta(minutes=1)
    demo_like = [
        RequestEvent(request_id=f"req-03-{i:05d}", ts=start + timedelta(seconds=i), host="demo-host-b",
                     model="tiny-decoder", hw_pool="cpu-b", traffic_class="chat", **failed)
        for i, failed in enumerate([
            dict[str, Any](status="error", outcome="error", error="IndexError: index out of range in self"),
            dict[str, Any](fp_nan=3, fp_status="ok"),
        ])
    ]  # fmt: skip
    seed(store, events=demo_like)
    dsn = f"chdb://{store.dsn.path}?database={store.database}"
    res = runner.invoke(app, ["requests", "--failing", *WINDOW, "--dsn", dsn], env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    assert _table_rows(res.output) == [  # one table line a request: nothing in it folded
        [e.request_id, f"{e.ts:%Y-%m-%d %H:%M:%S}", "cpu-b", "demo-host-b"] for e in reversed(demo_like)
    ], res.output
    follow = [line for line in res.output.splitlines() if line.startswith("req-03-")]
    assert follow == [
        "req-03-00001: non-finite output · model tiny-decoder · outcome hit · 0.0 ms · NaN 3, inf 0",
        "req-03-00000: error · model tiny-decoder · outcome error · 0.0 ms · IndexError: index out of range in self",
    ], res.output


def test_one_request_shows_its_newest_replay_verdicts(store: Store) -> None:
    """Walk 42 (replay D8): ``requests --id`` said nothing of the request's recorded replay verdicts."""
    from inferensics.schema.events import ReplayResultEvent

    verdicts = [
        ReplayResultEvent(
            ts=END + timedelta(minutes=i), replay_id=f"rp-{i}", request_id="r-error", device_name="cpu",
            attribution="decomposition", op="aten.silu", fx_node="silu", kernel="triton_poi_fused_silu_0",
            source_file="model.py", source_line=26, source_text="y = F.silu(x)", detail="aten.silu decomposition",
            request_host="h1", request_ts=T + timedelta(minutes=1),
        )
        for i in range(5)
    ]  # fmt: skip
    seed(store, events=[*failing_requests(), *verdicts])
    dsn = f"chdb://{store.dsn.path}?database={store.database}"
    res = runner.invoke(app, ["requests", "--id", "r-error", "--dsn", dsn], env=ENV)
    assert res.exit_code == 0, res.output
    shown = [line for line in res.output.splitlines() if line.startswith(("replay verdict", "  and"))]
    assert shown == [
        f"replay verdict: decomposition · op aten.silu · node silu · model.py:26 y = F.silu(x) · kernel "
        f"triton_poi_fused_silu_0 · aten.silu decomposition · {END + timedelta(minutes=i):%Y-%m-%d %H:%M:%S} UTC on "
        f"cpu (replay rp-{i})"
        for i in (4, 3, 2)
    ] + ["  and 2 older replay verdict(s)"], res.output
    never = runner.invoke(app, ["requests", "--id", "r-nan", "--dsn", dsn], env=ENV)
    assert never.exit_code == 0, never.output
    assert "replay verdict" not in never.output


@pytest.mark.parametrize("option", ["--model", "--host", "--traffic-class", "--bundle", "--id"])
def test_an_argument_that_is_not_utf8_is_one_line(option: str, seeded: str) -> None:
    """``--model $'\\xff'`` reaches Python as a lone surrogate, which no query can carry: it raised a chDB cast error
    with its traceback (``--id`` said "unable to parse raw data as a unicode string")."""
    res = runner.invoke(app, ["requests", "--failing", option, "h\udcff", "--dsn", seeded], env=ENV)
    assert res.exit_code == 2, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert res.output.strip() == (
        f"error: {option} 'h\\xff': not UTF-8 text; the store's models, hosts, pools, classes and bundle ids are "
        "UTF-8: check the shell's quoting or the terminal's encoding"
    )


def test_a_request_whose_replay_named_a_fault_is_listed_with_its_verdict(store: Store) -> None:
    """``--failing`` left out a request whose output was wrong but finite and whose replay named the fault; a verdict
    of a request listed for another reason follows its detail."""
    from inferensics.schema.events import ReplayResultEvent

    wrong = RequestEvent(request_id="r-wrong", ts=T + timedelta(minutes=20), host="h1", model="m", hw_pool="p1",
                         traffic_class="interactive")  # fmt: skip
    verdicts = [
        ReplayResultEvent(ts=END, replay_id="rp-1", request_id="r-wrong", attribution="decomposition", op="aten.silu",
                          fx_node="silu", request_host="h1", request_ts=wrong.ts),
        ReplayResultEvent(ts=END, replay_id="rp-2", request_id="r-error", attribution="schedule", request_host="h1",
                          request_ts=T + timedelta(minutes=1)),
        ReplayResultEvent(ts=END, replay_id="rp-3", request_id="r-ok-1", attribution="none", request_host="h1",
                          request_ts=T),
    ]  # fmt: skip
    seed(store, events=[*failing_requests(), wrong, *verdicts])
    dsn = f"chdb://{store.dsn.path}?database={store.database}"
    res = runner.invoke(app, ["requests", "--failing", "--model", "m", *WINDOW, "--dsn", dsn], env=ENV)
    assert res.exit_code == 0, res.output
    rows = {r[0]: [r[5], r[8]] for r in _table_rows(res.output)}
    assert rows["r-wrong"] == ["replayed fault", "replay verdict decomposition · op aten.silu · node silu"]
    assert rows["r-error"] == [
        "error", "RuntimeError: CUDA error: an illegal memory access · replay verdict schedule"
    ]  # fmt: skip
    assert "r-ok-1" not in rows
    assert "all 8 (error 3, non-finite output 2, eager fallback 2, replayed fault 1)" in res.output


BREAK_REASON = "Dynamo does not support tracing `Tensor.item()` with config.capture_scalar_outputs=False."
"""The first line of the seeded graph break's reason (newuser finding 2: a Tensor.item() break)."""


def _split_requests() -> list[object]:
    """Requests of a model with a graph break: one compiled (its record of the break), one served by the cached
    graphs with a NaN output, inputs captured, from a bundle, one slow recompile, one run wholly eagerly."""
    from inferensics.schema.events import GraphBreakEvent

    def req(request_id: str, minute: int, **fields: object) -> RequestEvent:
        base: dict[str, object] = {"host": "h1", "model": "m", "hw_pool": "p1", "traffic_class": "interactive",
                                   "fallback_reason": "graph_break:GB0124", "latency_ms": 20.0}  # fmt: skip
        return RequestEvent(request_id=request_id, ts=T + timedelta(minutes=minute), **{**base, **fields})

    brk = GraphBreakEvent(
        ts=T, host="h1", model="m", hw_pool="p1", request_id="r-compile", registry_id="GB0124",
        break_type="Unsupported Tensor.item() call", reason=f"{BREAK_REASON}\n  more",
        user_frame="model.py:34 in forward", code_location="model.py:30:forward",
    )  # fmt: skip
    return [
        brk,
        req("r-compile", 0, outcome="compile", latency_ms=900.0),
        req("r-nan", 1, outcome="hit", fp_status="ok", fp_nan=16384, capture_blob="ab" * 32, bundle_id="bnd-1"),
        req("r-slow", 2, outcome="recompile", recompiles=1, latency_ms=54414.9),
        req("r-eager", 3, outcome="fallback"),
        req("r-ok", 4, outcome="hit", fp_status="unsampled"),
    ]


def test_one_request_shows_its_output_verdict_its_capture_and_its_graph_break_as_a_split(store: Store) -> None:
    """newuser findings 1 and 2: ``--id`` said ``status ok`` of a NaN output, never said whether its inputs were
    captured, and printed ``fallback: graph_break:GB0124`` for a request that compiled graphs served."""
    seed(store, events=_split_requests())  # type: ignore[arg-type]
    dsn = f"chdb://{store.dsn.path}?database={store.database}"
    res = runner.invoke(app, ["requests", "--id", "r-nan", "--dsn", dsn], env=ENV)
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[1].startswith("outcome hit · status non-finite · ")
    assert lines[2:6] == [
        "bundle: no bundle status recorded (bundle bnd-1, no registration of it stored): whether the compiled graphs "
        "that served it came from the bundle is not known (its host's SDK records none)",
        "output: non-finite (NaN 16384, inf 0)",
        f"inputs captured (blob {'ab' * 32}, blob not found in the store)",
        "graph break: split at graph break GB0124 (Unsupported Tensor.item() call; "
        + BREAK_REASON
        + "; at model.py:34 in forward): compiled graphs ran, with the code at the break run eagerly between them; "
        "not an eager fallback",
    ]
    assert "fallback:" not in res.output
    eager = runner.invoke(app, ["requests", "--id", "r-eager", "--dsn", dsn], env=ENV)
    assert eager.exit_code == 0, eager.output
    assert "graph break: ran eagerly: graph break GB0124 (Unsupported Tensor.item() call; " in eager.output
    assert "left nothing to compile, so the whole frame ran eagerly (an eager fallback)" in eager.output
    unsampled = runner.invoke(app, ["requests", "--id", "r-ok", "--dsn", dsn], env=ENV)
    assert "output: not fingerprinted (the sampling rule, fp_rate, skipped it)" in unsampled.output
    assert "inputs not captured" in unsampled.output


def test_the_footer_suggests_replay_only_for_a_failing_request_replay_can_take(store: Store) -> None:
    """newuser finding 6: the footer said ``inferensics replay <newest>`` of a healthy request served without a
    bundle, which replay refuses (rc 2)."""
    seed(store, events=_split_requests())  # type: ignore[arg-type]
    dsn = f"chdb://{store.dsn.path}?database={store.database}"
    res = runner.invoke(app, ["requests", *WINDOW, "--dsn", dsn], env={**ENV, "INFERENSICS_BUNDLE_KEYRING": "/k.pub"})
    assert res.exit_code == 0, res.output
    assert res.output.strip().splitlines()[-4:] == [
        "open one: inferensics requests --id r-ok, or the dashboard's request page /request?request_id=r-ok",
        "replay a failing one: inferensics replay r-nan --service SERVICE_URL --keyring /k.pub --bundle DIR",
        "  SERVICE_URL: replay fetches the request through a collector service; while none owns this store, start "
        "one on it (inferensics serve --dsn DSN: it holds the store until stopped)",
        "  DIR: the folder of bundle bnd-1 (the one inferensics bundle build wrote), which this service holds no push "
        "of; or push it first with inferensics bundle push DIR --service SERVICE_URL and leave --bundle DIR out",
    ]
    assert "inferensics replay r-ok" not in res.output
    healthy = runner.invoke(app, ["requests", "--outcome", "compile", *WINDOW, "--dsn", dsn], env=ENV)
    assert healthy.output.strip().splitlines()[-1] == (
        "open one: inferensics requests --id r-compile, or the dashboard's request page /request?request_id=r-compile"
    )


def test_requests_are_listed_by_outcome_and_latency(store: Store) -> None:
    """newuser finding 7: no column or filter told the requests that recompiled or were slow."""
    seed(store, events=_split_requests())  # type: ignore[arg-type]
    dsn = f"chdb://{store.dsn.path}?database={store.database}"
    res = runner.invoke(app, ["requests", "--outcome", "recompile", "--outcome", "compile", *WINDOW, "--dsn", dsn],
                        env=ENV)  # fmt: skip
    assert res.exit_code == 0, res.output
    rows = _table_rows(res.output)
    assert [(r[0], r[6], r[7]) for r in rows] == [
        ("r-slow", "recompile", "54,414.9"),
        ("r-compile", "compile", "900.0"),
    ]
    assert "requests (outcome recompile or compile, 2026-03-03 12:00:00 to" in res.output
    slow = runner.invoke(app, ["requests", "--slower-than", "1000", *WINDOW, "--dsn", dsn], env=ENV)
    assert [r[0] for r in _table_rows(slow.output)] == ["r-slow"]
    assert "at least 1000 ms" in slow.output
    bad = runner.invoke(app, ["requests", "--outcome", "recomp", "--dsn", dsn], env=ENV)
    assert (bad.exit_code, bad.output.strip()) == (
        2,
        "error: --outcome 'recomp': not an outcome; give one of hit, compile, recompile, fallback, eager, error "
        "(repeat for several)",
    )
    one = runner.invoke(app, ["requests", "--id", "r-slow", "--outcome", "hit", "--dsn", dsn], env=ENV)
    assert one.output.strip() == "error: --id shows one request: --outcome narrows a list; leave it out"


def test_the_replay_hint_runs_as_printed(tmp_path: Path) -> None:
    """Walk (oncall): the footer's bare ``inferensics replay ID`` stopped at once ("no keyring of trusted builders",
    rc 2), and from a store it named no service to fetch the request through. Through a service it names that
    service, and the keyring from ``$INFERENSICS_BUNDLE_KEYRING``, else a placeholder it explains; the command parses
    as replay's."""
    import shlex

    from typer.main import get_command

    start = (datetime.now(UTC) - timedelta(hours=2)).replace(second=0, microsecond=0)  # within the store's TTL
    split = [e.model_copy(update={"ts": start + (e.ts - T)}) for e in _split_requests() if isinstance(e, RequestEvent)]
    with new_service(tmp_path) as svc:
        ok, line = record_through_service(svc.url, INGEST, split, RequestEvent.TABLE.name)
        assert ok, line
        rows = lambda: svc.client(ADMIN).status()["store"]["row_counts"][RequestEvent.TABLE.name]  # noqa: E731
        assert poll(rows, lambda n: n >= len(split), timeout=60, interval=0.2) == len(split)
        window = ["--since", f"{start:%Y-%m-%dT%H:%M}", "--until", f"{start + timedelta(hours=1):%Y-%m-%dT%H:%M}"]
        args = ["requests", *window, "--service", svc.url, "--token", READ]
        res = runner.invoke(app, args, env={**ENV, "INFERENSICS_BUNDLE_KEYRING": "", "INFERENSICS_TOKEN": ""})
        assert res.exit_code == 0, res.output
        hint = res.output.strip().splitlines()[-4:]
        assert hint == [  # bnd-1 was never pushed: replay takes its folder (session 45)
            f"replay a failing one: inferensics replay r-nan --service {svc.url} --keyring BUILDER.pub --token TOKEN "
            "--bundle DIR",
            "  BUILDER.pub: the trusted builders' public keys, a .pub file or a folder of them (the one inferensics "
            "bundle keygen wrote), or set $INFERENSICS_BUNDLE_KEYRING",
            "  TOKEN: a token of the service with the admin role, or set $INFERENSICS_TOKEN",
            "  DIR: the folder of bundle bnd-1 (the one inferensics bundle build wrote), which this service holds no "
            f"push of; or push it first with inferensics bundle push DIR --service {svc.url} and leave --bundle DIR "
            "out",
        ], res.output
        words = shlex.split(hint[0].partition(": ")[2])
        replay = get_command(app).commands["replay"]  # type: ignore[attr-defined]
        params = replay.make_context("replay", words[2:]).params
        assert (params["request_id"], params["service"], params["keyring"]) == ("r-nan", svc.url, "BUILDER.pub")


def _replayable_failures() -> list[object]:
    """Failing requests served from a bundle with their inputs captured, newest last: a NaN output from the compiled
    code, an error raised while compiled code ran, a fallback, one whose replay blamed its inputs and, newest, an
    error raised before any compiled graph ran (the server's input validation, as the demo's ``invalid`` incident)."""
    from inferensics.schema.events import ReplayResultEvent

    def req(request_id: str, minute: int, **fields: object) -> RequestEvent:
        base: dict[str, object] = {"host": "h1", "model": "m", "hw_pool": "p1", "traffic_class": "interactive",
                                   "bundle_id": "bnd-1", "capture_blob": "ab" * 32}  # fmt: skip
        return RequestEvent(request_id=request_id, ts=T + timedelta(minutes=minute), **{**base, **fields})

    blamed = req("r-blamed", 4, fp_status="ok", fp_nan=5)
    return [
        req("r-nan", 1, outcome="hit", guard_outcome="hit", graph_keys=("g1",), graph_artifacts=("a1",),
            graph_calls=(1,), graph_us=(10,), fp_status="ok", fp_nan=12),
        req("r-kernel-error", 2, status="error", outcome="error", guard_outcome="hit", error="RuntimeError: CUDA"),
        req("r-fallback", 3, outcome="fallback", fallback_reason="recompile_limit"),
        blamed,
        ReplayResultEvent(ts=END, replay_id="rp-1", request_id="r-blamed", attribution="inputs", request_host="h1",
                          request_ts=blamed.ts),
        req("r-invalid", 5, status="error", outcome="error", guard_outcome="none",
            error="InvalidRequestError: token id 70000 is outside the vocabulary of 32000\n  more"),
    ]  # fmt: skip


def test_the_replay_hint_names_the_request_that_shows_the_fault_and_says_why(store: Store) -> None:
    """Walk (failing): the hint named the newest replayable failing request, in the demo an input-validation error
    raised before any compiled graph ran, not the request whose compiled code produced NaN. It prefers a numeric fault
    of the compiled code, then an error it raised, then a fallback, then a fault of the inputs, the newest of a rank,
    and says why when it passes newer ones over."""
    seed(store, events=_replayable_failures())  # type: ignore[arg-type]
    dsn = f"chdb://{store.dsn.path}?database={store.database}"
    env = {**ENV, "INFERENSICS_BUNDLE_KEYRING": "/k.pub"}

    def hint(*narrow: str) -> list[str]:
        res = runner.invoke(app, ["requests", "--failing", *WINDOW, *narrow, "--dsn", dsn], env=env)
        assert res.exit_code == 0, res.output
        lines = res.output.strip().splitlines()
        at = next(i for i, line in enumerate(lines) if line.startswith("replay a failing one: "))
        return [lines[at], *(line for line in lines[at + 1 :] if not line.startswith(("  SERVICE_URL", "  DIR")))]

    assert hint() == [
        "replay a failing one: inferensics replay r-nan --service SERVICE_URL --keyring /k.pub --bundle DIR",
        "  r-nan chosen over 4 newer replayable ones: it produced non-finite output (NaN 12, inf 0) where compiled "
        "code ran, while r-invalid (the newest) errored before any compiled graph ran (its inputs failed validation, "
        "most likely): InvalidRequestError: token id 70000 is outside the vocabulary of 32000",
    ]
    assert hint("--outcome", "error")[:2] == [
        "replay a failing one: inferensics replay r-kernel-error --service SERVICE_URL --keyring /k.pub --bundle DIR",
        "  r-kernel-error chosen over a newer replayable one: it errored while compiled code ran: RuntimeError: "
        "CUDA, while r-invalid (the newest) errored before any compiled graph ran (its inputs failed validation, "
        "most likely): InvalidRequestError: token id 70000 is outside the vocabulary of 32000",
    ]
    fallback_or_blamed = hint("--since", f"{T + timedelta(minutes=3):%Y-%m-%dT%H:%M}")
    assert fallback_or_blamed[0] == (
        "replay a failing one: inferensics replay r-fallback --service SERVICE_URL --keyring /k.pub --bundle DIR"
    )
    assert "while r-invalid (the newest) errored before" in fallback_or_blamed[1]
    inputs_only = hint("--since", f"{T + timedelta(minutes=4):%Y-%m-%dT%H:%M}")
    assert inputs_only == [
        "replay a failing one: inferensics replay r-invalid --service SERVICE_URL --keyring /k.pub --bundle DIR",
        "  every replayable one listed failed on its inputs: the newest, r-invalid, errored before any compiled graph "
        "ran (its inputs failed validation, most likely): InvalidRequestError: token id 70000 is outside the "
        "vocabulary of 32000; replay shows which input, not a fault of the compiled code",
    ]
    newest_is_best = hint("--until", f"{T + timedelta(minutes=1, seconds=30):%Y-%m-%dT%H:%M:%S}")
    assert newest_is_best == [
        "replay a failing one: inferensics replay r-nan --service SERVICE_URL --keyring /k.pub --bundle DIR"
    ]


def test_the_replay_hint_passes_a_bundle_never_pushed_with_bundle_dir(tmp_path: Path) -> None:
    """Session 45 (newuser D1): the hint of a request served from a bundle never pushed read ``inferensics replay
    nu-b-2 --service URL --keyring BUILDER.pub``, which stopped with "bundle 892c... is not available here (not
    pushed to the service)". It takes ``--bundle DIR`` and says what DIR is, or the push that makes it needless; a
    pushed bundle's hint is unchanged. Read through the service with a read token (the push state is a named query)."""
    from tests.dashboard.replay_pushes import PUSHED, R_NO_BUNDLE, R_PUSHED, R_UNPUSHED, UNPUSHED, UNPUSHED_NAME, events

    now = datetime.now(UTC).replace(second=0, microsecond=0)
    seeded = events(now)
    with new_service(tmp_path) as svc:
        for table in {e.TABLE.name for e in seeded}:
            ok, line = record_through_service(svc.url, INGEST, [e for e in seeded if e.TABLE.name == table], table)
            assert ok, line
        rows = lambda: svc.client(ADMIN).status()["store"]["row_counts"]  # noqa: E731
        assert poll(rows, lambda n: n.get(RequestEvent.TABLE.name, 0) >= 5 and n.get("bundle_states", 0) >= 1,
                    timeout=60, interval=0.2)  # fmt: skip
        env = {**ENV, "INFERENSICS_BUNDLE_KEYRING": "/k.pub", "INFERENSICS_TOKEN": ""}
        listing = ["requests", "--failing", "--since", "1h", "--service", svc.url, "--token", READ]

        def hint(*narrow: str) -> list[str]:
            res = runner.invoke(app, [*listing, *narrow], env=env)
            assert res.exit_code == 0, res.output
            lines = res.output.strip().splitlines()
            return lines[next(i for i, line in enumerate(lines) if line.startswith("replay a failing one: ")) :]

        assert hint() == [
            f"replay a failing one: inferensics replay {R_UNPUSHED} --service {svc.url} --keyring /k.pub --token TOKEN "
            "--bundle DIR",
            "  TOKEN: a token of the service with the admin role, or set $INFERENSICS_TOKEN",
            f"  DIR: the folder of bundle {UNPUSHED_NAME} {UNPUSHED[:16]} (the one inferensics bundle build wrote), "
            f"which this service holds no push of; or push it first with inferensics bundle push DIR --service "
            f"{svc.url} and leave --bundle DIR out",
        ]
        assert hint("--bundle", PUSHED[:12]) == [
            f"replay a failing one: inferensics replay {R_PUSHED} --service {svc.url} --keyring /k.pub --token TOKEN",
            "  TOKEN: a token of the service with the admin role, or set $INFERENSICS_TOKEN",
        ]
        one = runner.invoke(app, ["requests", "--id", R_NO_BUNDLE, "--service", svc.url, "--token", READ], env=env)
        assert one.exit_code == 0, one.output
        assert (
            "inputs not captured (replay needs them): its host did not capture them: capture is off on that host (the "
            "default; SdkConfig(capture=CaptureRules(enabled=True)) turns it on)"
        ) in one.output
        assert "bundle none" in one.output.splitlines()[0]
