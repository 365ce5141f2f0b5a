"""Inductor's generated wrapper module: its kernels, their source, and where each is defined."""

from __future__ import annotations

import hashlib
import re
from typing import Any

_KERNEL_DEF = re.compile(r"^(?P<name>\w+) = async_compile\.\w+\(", re.MULTILINE)


def kernels(code: str) -> dict[str, str]:
    """Kernel name → its generated source (text from its definition to the next one)."""
    starts = list(_KERNEL_DEF.finditer(code))
    out: dict[str, str] = {}
    for i, m in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else code.find("async_compile.wait", m.end())
        out[m["name"]] = code[m.end() : end if end > 0 else len(code)]
    return out


def kernel_line(code: str, kernel: str) -> int:
    """1-based line of the wrapper module where ``kernel`` is defined (0 when absent)."""
    m = re.search(rf"^{re.escape(kernel)} = async_compile\.", code, re.MULTILINE)
    return code.count("\n", 0, m.start()) + 1 if m else 0


def differing_kernels(served: str, fresh: str) -> list[str]:
    """Kernels whose source differs between two wrapper modules (or exist in only one)."""
    a, b = kernels(served), kernels(fresh)
    return [name for name in list(a) + [n for n in b if n not in a] if a.get(name) != b.get(name)]


def changed_tokens(served: str, fresh: str) -> set[str]:
    """Identifiers on the lines that differ between two versions of a kernel."""
    import difflib

    words: set[str] = set()
    for line in difflib.unified_diff(served.splitlines(), fresh.splitlines(), lineterm="", n=0):
        if line.startswith(("+", "-")) and not line.startswith(("+++", "---")):
            words.update(re.findall(r"[A-Za-z_]\w*", line))
    return words


_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?f?(?![\w.])")


def changed_numbers(served: str, fresh: str) -> tuple[list[float], list[float]]:
    """Numeric literals on the lines that differ between two versions of a kernel, as
    ``(only in the served version, only in the fresh one)``: a constant the stale artifact got wrong."""
    import difflib

    old: list[float] = []
    new: list[float] = []
    for line in difflib.unified_diff(served.splitlines(), fresh.splitlines(), lineterm="", n=0):
        if line.startswith(("+++", "---")) or not line.startswith(("+", "-")):
            continue
        values = [float(m.group().rstrip("f")) for m in _NUMBER.finditer(line[1:])]
        (new if line.startswith("+") else old).extend(values)
    return [v for v in old if v not in new], [v for v in new if v not in old]


def code_digest(code: str) -> str:
    """sha256 of a wrapper module (the artifact id of ARCHITECTURE decision 3)."""
    return hashlib.sha256(code.encode()).hexdigest()


def kernels_of_node(mappings: list[dict[str, Any]], node: str) -> list[str]:
    """Kernels (``name``, without the debug handle) that compute a Dynamo node, from provenance."""
    found: list[str] = []
    for mapping in mappings:
        post_nodes = mapping.get("preToPost", {}).get(node, [])
        for key, table in mapping.items():
            if not key.startswith("postTo") or key == "postToPre" or not isinstance(table, dict):
                continue
            for post in post_nodes:
                for kernel in table.get(post, []):
                    name = str(kernel).split(":")[0]
                    if name not in found:
                        found.append(name)
    return found


def nodes_of_kernel(mappings: list[dict[str, Any]], kernel: str) -> list[str]:
    """Dynamo nodes a kernel computes, from provenance."""
    found: list[str] = []
    for mapping in mappings:
        post_to_pre = mapping.get("postToPre", {})
        for key, table in mapping.items():
            if not key.endswith("ToPost") or key == "preToPost" or not isinstance(table, dict):
                continue
            for kname, posts in table.items():
                if str(kname).split(":")[0] != kernel:
                    continue
                for post in posts:
                    for pre in post_to_pre.get(post, []):
                        if pre not in found:
                            found.append(pre)
    return found
