"""``inferensics import-trace`` over every file of the shared corpus: the imported counts equal what the
logs contain, counted here independently with regular expressions over the raw text."""

from __future__ import annotations

import gzip
import hashlib
import re
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from inferensics.cli.app import app
from inferensics.collector.trace import read_trace_file, trace_files
from inferensics.schema import CacheEvent, CompileEvent, GraphBreakEvent
from inferensics.schema import columns as col
from inferensics.schema.store import Store
from tests.collector.trace.log_counts import HEADER, count_log

CORPUS = Path("/work/shared/corpus/torch-trace")
FILES = sorted(p for p in CORPUS.rglob("*") if p.is_file() and p.name not in ("README.md", "LICENSE.tlparse"))


def _expected(path: Path) -> Counter[str]:
    """Counts read straight off the text, without the decoder under test."""
    return count_log(path).counts


def test_corpus_is_present() -> None:
    assert len(FILES) == 10
    assert sorted(p.name for p in trace_files(CORPUS)) == sorted(p.name for p in FILES)


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_counts_equal_the_log(path: Path) -> None:
    want = _expected(path)
    report, _ = read_trace_file(path, host="h")
    s = report.stats
    assert s.compiles == want["compiles"]
    assert s.failures == want["failures"]
    assert s.graph_breaks == want["graph_breaks"]
    assert (s.recompiles, s.recompile_limit) == (want["recompiles"], want["recompile_limit"])
    for kind in ("fx_graph", "aot_autograd"):
        for result in ("hit", "miss", "bypass"):
            assert s.cache[f"{kind}_{result}"] == want[f"{kind}_{result}"], (kind, result)
    assert report.damaged_lines + s.damaged_payloads == want["damaged"]


def test_corrupted_file_is_counted_not_fatal() -> None:
    report, _ = read_trace_file(CORPUS / "simple_corrupted_json.log", host="h")
    clean, _ = read_trace_file(CORPUS / "simple.log", host="h")
    assert report.stats.damaged_payloads == 1
    assert report.stats.compiles == clean.stats.compiles == 1


def test_damaged_cache_payload_still_counts_the_lookup(tmp_path: Path) -> None:
    """A damaged payload loses the lookup's key, not the lookup: its header names the cache and result."""
    lines = (CORPUS / "simple.log").read_text(encoding="utf-8").splitlines(keepends=True)
    header = next(i for i, ln in enumerate(lines) if '"name": "fx_graph_cache_miss"' in ln and HEADER.match(ln))
    assert lines[header + 1].startswith('\t{"key": ')
    lines[header + 1] = lines[header + 1].replace('"key"', "'key'", 1)
    damaged = tmp_path / "simple_cache_damaged.log"
    damaged.write_text("".join(lines), encoding="utf-8")
    want = _expected(damaged)
    assert (want["fx_graph_miss"], want["damaged"]) == (1, 1)

    report, events = read_trace_file(damaged, host="h")
    assert report.stats.cache == Counter({"fx_graph_miss": 1})
    assert report.stats.damaged_payloads == 1
    (lookup,) = [e for e in events if isinstance(e, CacheEvent)]
    assert (lookup.cache, lookup.result, lookup.cache_key) == ("fx_graph", "miss", "")
    (compile_record,) = [e for e in events if isinstance(e, CompileEvent)]
    assert compile_record.cache_status == "miss"


def _process(path: Path) -> tuple[str, str]:
    """The process that wrote a log: the pid and time in its first line's glog prefix."""
    m = re.match(r"^[VIWEC](\d{4} [\d:.]+)\s+(\d+) ", path.read_text(encoding="utf-8"))
    assert m is not None, path
    return m[2], m[1]


def test_cli_imports_whole_corpus(store: Store) -> None:
    dsn = f"chdb://{store.dsn.path}?database={store.database}"
    # The corpus logs are older than any table's retention: --redate stores them (at the import time).
    args = ["import-trace", str(CORPUS), "--dsn", dsn, "--host", "imp", "--redate"]
    res = CliRunner().invoke(app, args, env={"COLUMNS": "300"})
    assert res.exit_code == 0, res.output
    want: Counter[str] = Counter()
    unique = {hashlib.sha256(f.read_bytes()).hexdigest(): f for f in reversed(FILES)}
    # One process's log is there under four names (three the same bytes, one a newline longer), another's twice
    # (one payload damaged): each process's compiles are stored once, from the first of its logs.
    processes = {_process(f): f for f in reversed(FILES)}
    assert len(FILES) - len(processes) == 4
    for f in processes.values():
        want.update(_expected(f))
    assert res.output.count("already imported as chromium_events.log (same content") == len(FILES) - len(unique) == 2
    assert res.output.count("  1 of the compiles was already stored (imported before, from this process's log)") == 2
    compiles = store.select_events(CompileEvent)
    assert len(compiles) == want["compiles"]
    assert sum(c.outcome == "failed" for c in compiles) == want["failures"]
    assert all(c.source == "trace" and c.host == "imp" for c in compiles)
    cache = Counter(f"{e.cache}_{e.result}" for e in store.select_events(CacheEvent))
    assert cache == Counter({k: v for k, v in want.items() if k.startswith(("fx_graph_", "aot_autograd_"))})
    assert len(store.select_events(GraphBreakEvent)) == want["graph_breaks"]
    with_code = [c for c in compiles if c.artifact_id]
    assert with_code, "the corpus has output code"
    for c in with_code:
        code = store.get_blob(c.artifact_id)
        assert code is not None
        assert b"async_compile" in code
    rows = store.query_rows(
        f"SELECT count() FROM {store.database}.kernels WHERE {col.ARTIFACT_ID} IN {{ids:Array(String)}}",
        {"ids": [c.artifact_id for c in with_code]},
    )
    assert rows[0][0] > 0
    assert ", 1 damaged record skipped, " in res.output


def test_reimport_adds_nothing(store: Store) -> None:
    dsn = f"chdb://{store.dsn.path}?database={store.database}"
    log = CORPUS / "cache_hit_miss.log"
    args = ["import-trace", str(log), "--dsn", dsn, "--host", "imp", "--redate"]
    first = CliRunner().invoke(app, args, env={"COLUMNS": "300"})
    assert first.exit_code == 0, first.output
    counts = store.row_counts()
    assert counts["compiles"] == _expected(log)["compiles"] > 0
    again = CliRunner().invoke(app, args, env={"COLUMNS": "300"})
    assert again.exit_code == 0, again.output
    assert "already imported" in again.output
    assert store.row_counts() == counts


def test_not_a_trace_is_refused(store: Store) -> None:
    dsn = f"chdb://{store.dsn.path}?database={store.database}"
    readme = CORPUS / "README.md"
    res = CliRunner().invoke(app, ["import-trace", str(readme), "--dsn", dsn], env={"COLUMNS": "300"})
    # The exit status is the one `--help` names (it said exit 1; the command, like every refusal, exits 2).
    shown = CliRunner().invoke(app, ["import-trace", "--help"], env={"COLUMNS": "300"}).output
    assert f"refused: exit {res.exit_code} when PATH itself is one" in " ".join(shown.split()), shown
    assert res.exit_code != 0
    assert "is not a TORCH_TRACE log" in res.output
    assert "damaged" not in res.output
    assert store.row_counts().get("compiles", 0) == 0


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (bytes(range(256)) * 4, "it is binary, not a text log: byte 0x00 at offset 0 is not text"),
        (b"\n\n\xc3\x28\x80 xyz\n", "it is binary, not a text log: byte 0xc3 at offset 2 is not text"),
        (b"abc\x01\x02 valid UTF-8\n", "it is binary, not a text log: byte 0x01 at offset 3 is not text"),
        ("V1206 12:00:00.000000 1 torch/x.py:1] {}\n".encode("utf-16"),
         "it is UTF-16 text; a TORCH_TRACE log is UTF-8: convert it, e.g. with iconv -f UTF-16 -t UTF-8"),
        (gzip.compress((CORPUS / "simple.log").read_bytes(), mtime=0),
         "it is gzip-compressed: gunzip it, then import the log"),
        (b"\n\n" + "caf\u00e9 \u2603\n".encode() + b"\xff" * 40,
         "it is binary, not a text log: byte 0xff at offset 12 is not text"),
    ],
    ids=["nul-bytes", "not-utf-8", "control-bytes", "utf-16", "gzip", "text-then-binary"],
)  # fmt: skip
def test_a_binary_file_is_named_as_such_without_its_bytes(content: bytes, reason: str, tmp_path: Path) -> None:
    """A binary file's first "line" was echoed through a lossy decode: replacement characters and escapes."""
    path = tmp_path / "trace.log"
    path.write_bytes(content)
    store = tmp_path / "store"
    res = CliRunner().invoke(app, ["import-trace", str(path), "--dsn", f"chdb://{store}"], env={"COLUMNS": "500"})
    assert res.exit_code == 2, res.output
    assert res.output.strip().splitlines() == [
        f"error: {path} is not a TORCH_TRACE log ({reason}): pass TORCH_TRACE log files (written under "
        "TORCH_TRACE=<dir>) or directories of them"
    ]
    assert not store.exists()


def test_a_folder_of_other_files_is_not_made_a_store(tmp_path: Path) -> None:
    """`init` and the bundle state commands refused a folder of the user's files; import-trace, which also makes a
    store, wrote the engine's metadata/, store/ and tmp/ among them."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "todo.txt").write_text("not a store\n")
    res = CliRunner().invoke(
        app, ["import-trace", str(CORPUS / "simple.log"), "--dsn", f"chdb://{folder}"], env={"COLUMNS": "500"}
    )
    assert res.exit_code == 2, res.output
    assert res.output.strip().splitlines() == [
        f"error: {folder} is a folder of other files, not a store: `inferensics import-trace` imports into a store, "
        "or makes one in a new or empty folder (the engine writes its metadata/, store/ and tmp/ there); name one "
        "with --dsn or --data-dir"
    ]
    assert sorted(p.name for p in folder.iterdir()) == ["todo.txt"]


def test_several_paths_are_each_imported_and_a_bad_one_is_named(store: Store, tmp_path: Path) -> None:
    # What a shell glob gives: several files, one of them no log, and a path that is gone.
    dsn = f"chdb://{store.dsn.path}?database={store.database}"
    logs = [CORPUS / "cache_hit_miss.log", CORPUS / "comp_metrics.log"]
    args = ["import-trace", *map(str, logs), str(CORPUS / "README.md"), str(tmp_path / "gone.log"), "--dsn", dsn]
    args.append("--redate")  # the corpus logs are older than any table's retention
    res = CliRunner().invoke(app, args, env={"COLUMNS": "300"})
    assert res.exit_code == 2, res.output
    assert "README.md is not a TORCH_TRACE log" in res.output
    assert "gone.log does not exist" in res.output
    assert "(2 logs imported)" in res.output
    assert len(store.select_events(CompileEvent)) == sum(_expected(f)["compiles"] for f in logs) > 0


def test_directory_lists_what_it_skipped(store: Store) -> None:
    dsn = f"chdb://{store.dsn.path}?database={store.database}"
    res = CliRunner().invoke(app, ["import-trace", str(CORPUS), "--dsn", dsn], env={"COLUMNS": "300"})
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    at = lines.index("skipped 2 files that are not TORCH_TRACE logs:")
    assert lines[at + 1 : at + 3] == [
        f"  {CORPUS / 'LICENSE.tlparse'}: none of its 11 lines is a glog-prefixed JSON record (the first: "
        "'Copyright 2024 (c) Edward Z. Yang <ezyang@mit.edu>')",
        f"  {CORPUS / 'README.md'}: none of its 21 lines is a glog-prefixed JSON record (the first: "
        "'# Real PyTorch structured compile logs')",
    ]


LOGS = Path(__file__).parent / "logs"


def test_aot_inductor_compile_is_a_compile() -> None:
    """An AOTInductor compile's metrics carry a null compile id: still one compile, with its output code."""
    want = _expected(LOGS / "aoti_compile.log")
    report, events = read_trace_file(LOGS / "aoti_compile.log", host="h")
    assert report.stats.compiles == want["compiles"] == 1
    (compile_record,) = [e for e in events if isinstance(e, CompileEvent)]
    assert compile_record.outcome == "ok"
    assert compile_record.compile_id == "aot/0"
    assert compile_record.artifact_id
    assert report.damaged_lines + report.stats.damaged_payloads == 0


def test_export_records_are_unused_not_damaged() -> None:
    report, events = read_trace_file(LOGS / "draft_export.log", host="h")
    assert report.damaged_lines + report.stats.damaged_payloads == 0
    assert report.stats.unused["exported_program"] == 1
    assert report.stats.unused["expression_created"] == 1
    assert not events


def test_import_through_the_service_that_owns_the_store(tmp_path: Path) -> None:
    """While `inferensics serve` owns an embedded store, opening it said "reach the store through its
    `inferensics serve` API (--service URL)", an option import-trace lacked. Through a real service: the same
    rows as the log holds, the output code as blobs, a re-import that adds nothing, and a token that cannot
    read is one line naming the roles."""
    from tests.collector.service.harness import ADMIN, INGEST, new_service
    from tests.polling import poll

    logs = [CORPUS / "cache_hit_miss.log", CORPUS / "comp_failure.log"]
    want: Counter[str] = Counter()
    for log in logs:
        want.update(_expected(log))
    with new_service(tmp_path) as service:
        args = ["import-trace", *map(str, logs), "--service", service.url, "--host", "imp", "--redate"]
        res = CliRunner().invoke(app, [*args, "--token", ADMIN], env={"COLUMNS": "300"})
        assert res.exit_code == 0, res.output
        client = service.client()
        counts = "SELECT (SELECT count() FROM compiles WHERE host = 'imp'), (SELECT count() FROM cache_events)"
        got = poll(lambda: client.sql(counts).row(0), lambda r: r[0] >= want["compiles"], timeout=60, interval=0.2)
        assert got[0] == want["compiles"] > 0
        assert got[1] == sum(v for k, v in want.items() if k.startswith(("fx_graph_", "aot_autograd_")))
        failed = client.sql("SELECT count() FROM compiles WHERE outcome = 'failed'").item()
        assert failed == want["failures"] > 0
        artifacts = client.sql("SELECT DISTINCT artifact_id FROM compiles WHERE artifact_id != ''")["artifact_id"]
        assert len(artifacts) > 0
        assert all(b"async_compile" in client.get_blob(a) for a in artifacts)
        again = CliRunner().invoke(app, [*args, "--token", ADMIN], env={"COLUMNS": "300"})
        assert again.exit_code == 0, again.output
        assert again.output.count("already imported (same content") == 2
        ingest_only = CliRunner().invoke(app, [*args, "--token", INGEST], env={"COLUMNS": "300"})
        assert ingest_only.exit_code == 2
        assert "403 token lacks the 'read' role" in ingest_only.output
        assert "needs a token with the ingest and read roles (admin has both)" in ingest_only.output
        assert client.sql(counts).row(0) == got  # nothing added by either
