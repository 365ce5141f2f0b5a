"""The admin SQL endpoint's gate: one read-only statement, nothing that writes, kills or spies.

The engine's own ``readonly = 1`` (set on the admin session, see ``state.sql_store``) refuses INSERT,
DDL, SET, SYSTEM, OPTIMIZE and the table functions that reach files and networks (``file``, ``url``,
``remote``, ``s3``, ``INSERT INTO FUNCTION``). It does not refuse what the embedded engine runs inside
this process: ``INTO OUTFILE`` (the engine writes the file), ``KILL QUERY`` (it cancels the writer's
inserts), ``BACKUP``, several statements in one request, or reads of other sessions' queries and the
process's stacks. Those are refused here before the engine sees the text, on its tokens (comments,
string literals and quoted names are read as the engine reads them, so ``INTO/**/OUTFILE`` is caught and
``'INTO OUTFILE'`` in a string is not).
"""

from __future__ import annotations

import re
from typing import Final

READ_STATEMENTS: Final = frozenset({"SELECT", "WITH", "SHOW", "DESCRIBE", "DESC", "EXPLAIN", "EXISTS"})
"""The first word of a statement this endpoint runs."""
BLOCKED_TABLES: Final = frozenset(
    {"processes", "processlist", "stack_trace", "query_log", "query_thread_log", "processors_profile_log", "crash_log"}
)
"""System tables refused: other sessions' query text, this process's stacks."""
BLOCKED_FUNCTIONS: Final = frozenset({"merge", "cluster", "clusterallreplicas", "loop", "mergetreeindex"})
"""Table functions that reach a blocked table by a pattern or a name in a string."""

_TOKEN: Final = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<line>(?:--|\#[ !])[^\n]*)
  | (?P<block>/\*)
  | (?P<string>'(?:[^'\\]|\\.|'')*'|\$(?P<tag>[A-Za-z0-9_]*)\$.*?\$(?P=tag)\$)
  | (?P<quoted>"(?:[^"\\]|\\.|"")*"|`(?:[^`\\]|\\.|``)*`)
  | (?P<word>[A-Za-z_][A-Za-z0-9_$]*)
  | (?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)


class SqlRefusedError(ValueError):
    """The statement is not one this endpoint runs; the message says why."""


def _skip_block(text: str, pos: int) -> int:
    """The end of a ``/* */`` comment starting at ``pos`` (the engine nests them)."""
    depth, i = 0, pos
    while i < len(text):
        if text.startswith("/*", i):
            depth += 1
            i += 2
        elif text.startswith("*/", i):
            depth -= 1
            i += 2
            if depth == 0:
                return i
        else:
            i += 1
    raise SqlRefusedError("unterminated /* comment")


def tokens(text: str) -> list[tuple[str, str]]:
    """``(kind, text)`` of every token that is not a space or a comment; quoted names are unquoted."""
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:  # an unterminated quote
            raise SqlRefusedError("unterminated quoted string or name")
        kind = m.lastgroup or "other"
        if kind == "block":
            pos = _skip_block(text, pos)
            continue
        pos = m.end()
        if kind in ("space", "line"):
            continue
        value = m.group()
        if kind == "quoted":
            kind, value = "word", value[1:-1]
        out.append((kind, value))
    return out


def check_read_only(text: str) -> None:
    """Refuse what the engine's ``readonly`` setting lets through.

    Raises:
        SqlRefusedError: several statements, a statement that is not a read, ``INTO OUTFILE``, a blocked
            system table or table function; the message names it.
    """
    toks = tokens(text)
    while toks and toks[-1] == ("other", ";"):
        toks.pop()
    if not toks:
        raise SqlRefusedError("empty SQL")
    if ("other", ";") in toks:
        raise SqlRefusedError("send one statement per request (a ';' separates several)")
    i = 0
    while i < len(toks) and toks[i] == ("other", "("):
        i += 1
    first = toks[i][1].upper() if i < len(toks) and toks[i][0] == "word" else ""
    if first not in READ_STATEMENTS:
        raise SqlRefusedError(
            f"the SQL endpoint runs read statements only ({', '.join(sorted(READ_STATEMENTS))}); "
            f"{first or toks[0][1]!r} is not one"
        )
    words = [(k, v.lower()) for k, v in toks]
    for j, (kind, word) in enumerate(words):
        if kind != "word":
            continue
        after = words[j + 1] if j + 1 < len(words) else ("", "")
        if word == "into" and after == ("word", "outfile"):
            raise SqlRefusedError("INTO OUTFILE is refused: the SQL endpoint writes no files; the answer is the result")
        if word in BLOCKED_TABLES:
            raise SqlRefusedError(f"{word} is not readable here (other sessions' queries, the process's stacks)")
        if word in BLOCKED_FUNCTIONS and after == ("other", "("):
            raise SqlRefusedError(f"the table function {word}() is refused by the SQL endpoint")
