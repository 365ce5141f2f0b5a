"""What a TORCH_TRACE log contains, counted straight off its text with regular expressions and without
the decoder under test, so that import tests compare the importer with the log itself."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

HEADER = re.compile(r"^[VIWEC]\d{4} [\d:.]+\s+\d+ [^\]]*\] (\{.*)$")
CACHE = re.compile(r'"artifact": \{"name": "(fx_graph|aotautograd)_cache_(hit|miss|bypass)"')
IDS = re.compile(r'"frame_id": (\d+), "frame_compile_id": (\d+)')
BREAK_ID = re.compile(r"/gb/gb(\d{4})\.html")
BREAK_AT = re.compile(r"^Graph break in user code at (\S+)$", re.MULTILINE)
FRAME = re.compile(r'^  File "([^"]+)", line (\d+), in (\S+)$', re.MULTILINE)


@dataclass(frozen=True)
class LoggedBreak:
    """One graph-break report as the log states it."""

    compile_id: str
    registry_id: str
    break_type: str
    user_frame: str


@dataclass
class LogCounts:
    """Counts and per-record facts of one or more logs."""

    counts: Counter[str] = field(default_factory=Counter)
    breaks: list[LoggedBreak] = field(default_factory=list)
    recompile_reasons: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    fail_types: list[tuple[str, str]] = field(default_factory=list)

    def update(self, other: LogCounts) -> None:
        self.counts.update(other.counts)
        self.breaks += other.breaks
        self.recompile_reasons += other.recompile_reasons
        self.fail_types += other.fail_types


def _logged_break(compile_id: str, text: str) -> LoggedBreak:
    gb = BREAK_ID.search(text)
    lines = text.splitlines()
    # the break's type is the line right above its "  Explanation:" line
    above = [lines[i - 1] for i in range(1, len(lines)) if lines[i].startswith("  Explanation: ")]
    break_type = above[0].removeprefix("Graph Break Reason: ").strip() if above else ""
    at = BREAK_AT.search(text)
    user_code = text.split("User code traceback:\n", 1)[1].split("\n\n", 1)[0] if "User code traceback:" in text else ""
    frames = FRAME.findall(user_code)
    frame = f"{frames[-1][0]}:{frames[-1][1]} in {frames[-1][2]}" if frames else (at.group(1) if at else "")
    return LoggedBreak(compile_id, f"GB{gb.group(1)}" if gb else "", break_type, frame)


def count_log(path: Path) -> LogCounts:
    """Counts read straight off the text of ``path``."""
    out = LogCounts()
    counts = out.counts
    lines = path.read_bytes().decode("utf-8").split("\n")  # "\n" only: a "\r" is payload text
    compiles_with_break_reports: set[str] = set()
    restart_breaks: dict[str, int] = {}
    i = 0
    while i < len(lines):
        m = HEADER.match(lines[i])
        i += 1
        if not m:
            continue
        payload: list[str] = []
        while i < len(lines) and lines[i].startswith("\t"):
            payload.append(lines[i][1:])
            i += 1
        head = m.group(1)
        text = "\n".join(payload)
        ids = IDS.search(head)
        compile_id = f"{ids.group(1)}/{ids.group(2)}" if ids else ""
        digest = re.search(r'"has_payload": "([0-9a-f]{32})"', head)
        try:
            meta = json.loads(head)
        except ValueError:
            counts["damaged"] += 1
            continue
        if digest and hashlib.md5(text.encode("utf-8"), usedforsecurity=False).hexdigest() != digest.group(1):
            counts["damaged"] += 1
        if head.startswith('{"compilation_metrics": '):
            metrics = meta["compilation_metrics"]
            counts["compiles"] += 1
            if metrics.get("fail_type"):
                counts["failures"] += 1
                out.fail_types.append((compile_id, metrics["fail_type"]))
                if "recompile limit" in str(metrics.get("fail_reason")).lower():
                    counts["recompile_limit"] += 1
            restarts = metrics.get("restart_reasons") or []
            restart_breaks[compile_id] = sum("graph_break" in r for r in restarts)
        if '"name": "dynamo_graph_break_reason"' in head:
            counts["graph_breaks"] += 1
            compiles_with_break_reports.add(compile_id)
            out.breaks.append(_logged_break(compile_id, text))
        if '"name": "recompile_reasons"' in head:
            counts["recompiles"] += 1
            reasons_list = json.loads(text) if text.startswith("[") else [text]
            out.recompile_reasons.append((compile_id, tuple(reasons_list)))
        c = CACHE.search(head)
        if c:
            counts[f"{'fx_graph' if c.group(1) == 'fx_graph' else 'aot_autograd'}_{c.group(2)}"] += 1
    # a compile whose log has no break report still names its breaks among its restart reasons
    counts["graph_breaks"] += sum(n for cid, n in restart_breaks.items() if cid not in compiles_with_break_reports)
    return out


@dataclass(frozen=True)
class LoggedRecord:
    """One record as the log's text states it: its header line number, envelope and payload."""

    lineno: int
    envelope: dict[str, object]
    payload: str


def logged_records(text: str) -> list[LoggedRecord]:
    """Every record of a log's ``text`` whose envelope is JSON, read with the regular expression and ``json``
    alone (not the decoder under test)."""
    lines = text.split("\n")  # "\n" only: a "\r" is payload text
    out: list[LoggedRecord] = []
    i = 0
    while i < len(lines):
        m = HEADER.match(lines[i])
        i += 1
        if not m:
            continue
        start = i
        while i < len(lines) and lines[i].startswith("\t"):
            i += 1
        try:
            envelope = json.loads(m.group(1))
        except ValueError:
            continue
        out.append(LoggedRecord(start, envelope, "\n".join(line[1:] for line in lines[start:i])))
    return out


def logged_compilation_metrics(path: Path) -> list[tuple[str, dict[str, object]]]:
    """``(compile id or "", body)`` of each ``compilation_metrics`` record of ``path``, in log order."""
    out = []
    for r in logged_records(path.read_bytes().decode("utf-8")):
        body = r.envelope.get("compilation_metrics")
        if isinstance(body, dict):
            ids = r.envelope.get("frame_id"), r.envelope.get("frame_compile_id")
            out.append((f"{ids[0]}/{ids[1]}" if None not in ids else "", body))
    return out


KERNEL_DEF = re.compile(r"^(\w+) = async_compile\.\w+\(", re.MULTILINE)
EXTERN_CALL = re.compile(r"\b(extern_kernels\.\w+)\(")


def logged_kernels(path: Path) -> set[tuple[str, str]]:
    """``(sha256 of the output code, kernel name)`` of each kernel an ``inductor_output_code`` payload defines or
    calls (``extern_kernels.mm``)."""
    out: set[tuple[str, str]] = set()
    for r in logged_records(path.read_bytes().decode("utf-8")):
        if "inductor_output_code" in r.envelope:
            digest = hashlib.sha256(r.payload.encode("utf-8")).hexdigest()
            names = {*KERNEL_DEF.findall(r.payload), *EXTERN_CALL.findall(r.payload)}
            out |= {(digest, name) for name in names}
    return out
