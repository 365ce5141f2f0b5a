"""The verdict: what was wrong, where in the user's code, which kernel, and the numbers behind it."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from inferensics.schema.vocabularies import ATTRIBUTIONS

CATEGORIES: Final = tuple(a for a in ATTRIBUTIONS if a)
"""Every verdict category, in the order the ladder tests them (ARCHITECTURE decision 11)."""


@dataclass(frozen=True)
class Verdict:
    """The outcome of :func:`inferensics.replay.investigate`.

    Attributes:
        category: One of :data:`CATEGORIES`.
        op: The ATen or custom op at fault (``aten.rsqrt``, ``mylib::rms_norm``), or ``""``.
        fx_node: The first diverging node of the Dynamo FX graph, or ``""``.
        kernel: The generated kernel that computes it (``cpp_fused_mul_0``), or ``""``.
        source_file: The user source file of that node.
        source_line: Its line number (0 when unknown).
        source_text: That line's code, stripped.
        culprit: What the bisection switched to fix it (the decomposition, lowering, pass or config).
        summary: One sentence for people.
        evidence: The numbers: error ratios per rung, the tolerance used, the worst elements.
    """

    category: str
    op: str = ""
    fx_node: str = ""
    kernel: str = ""
    source_file: str = ""
    source_line: int = 0
    source_text: str = ""
    culprit: str = ""
    summary: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.category not in CATEGORIES:
            raise ValueError(f"unknown verdict category {self.category!r}; expected one of {', '.join(CATEGORIES)}")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)

    def to_json(self) -> str:
        """The verdict as JSON (sorted keys, so the same verdict gives the same bytes)."""
        return json.dumps(self.to_dict(), sort_keys=True, indent=2, default=str)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verdict:
        """Rebuild a verdict written by :meth:`to_dict`."""
        names = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in names})

    @property
    def not_reproduced(self) -> bool:
        """The request's row recorded an error or non-finite output that re-executing it did not give (the stored
        category stays ``none``: the schema has no other word for it)."""
        return bool(self.evidence.get("not_reproduced"))

    @property
    def location(self) -> str:
        """``file:line`` or ``""``."""
        return f"{self.source_file}:{self.source_line}" if self.source_file else ""

    def headline(self) -> str:
        """The verdict in one line: category, op, node, source line, kernel."""
        parts = ["NOT REPRODUCED (none)" if self.not_reproduced else self.category]
        if self.op:
            parts.append(f"op {self.op}")
        if self.fx_node:
            parts.append(f"node {self.fx_node}")
        if self.location:
            parts.append(f"at {self.location}")
        if self.kernel:
            parts.append(f"kernel {self.kernel}")
        return " · ".join(parts)
