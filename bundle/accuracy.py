"""Qualification's accuracy check: each shape's compiled output against eager, anchored on fp64.

A compiler customisation (a "fast GELU" in the decomposition table), a lowering or a fusion can make the
compiled code wrong while every other qualification figure looks healthy; replay names such a fault only
after a host served it. So the build compares, per shape and on the inputs it already made, the compiled
output with the same model run eagerly in its serving dtype and in float64, by the error-ratio rule replay
uses (:mod:`inferensics.bundle.tolerance`): compiled error against fp64 over eager's own error against fp64,
at most :data:`~inferensics.bundle.tolerance.RATIO_LIMIT`, and no non-finite value eager does not have.

Eager's own distance from fp64 is recorded beside (in units of the dtype's rounding, replay's
:func:`~inferensics.bundle.tolerance.check_eager`): beyond the limit it means the model's own ops or a kernel
provider are wrong, which the compiled code follows and the ratio cannot see; the report and the build's
output say so, and it does not refuse (it is no fault of the compiled code).

The float64 copy of the model is made once, on first use, and dropped with the check. A model that cannot
run in float64 (an op without a float64 kernel) is left unchecked and the report says why: refusing it would
refuse every such model, and comparing against eager alone would flag fp32 rounding as a fault. So is a shape
whose output holds no floating-point tensor (token ids, an argmax): the rule has nothing to compare, and a
"within tolerance, error ratio 0" would claim a check that did not happen.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import torch

from inferensics.bundle.errors import BundleError, error_line
from inferensics.bundle.tolerance import (
    EAGER_LIMIT,
    RATIO_LIMIT,
    Comparison,
    EagerCheck,
    check_eager,
    compare,
    float_leaves,
    fp64_model,
    to_fp64,
)

RULE: Final = (
    "compiled error vs fp64 over eager's own error vs fp64, the larger of the RMSE and max-abs ratios; "
    "new non-finite values fail"
)
"""The rule, as the report states it."""


@dataclass(frozen=True)
class ShapeAccuracy:
    """One shape's compiled output judged against eager and fp64."""

    comparison: Comparison | None
    """The figures (``None``: not checked, see :attr:`unchecked`)."""
    unchecked: str = ""
    """Why the shape could not be checked (the fp64 or eager reference raised)."""
    eager: EagerCheck | None = None
    """Eager in the serving dtype against fp64, in rounding units (``None`` when not checked)."""

    @property
    def failed(self) -> bool:
        """Checked and outside tolerance."""
        return self.comparison is not None and not self.comparison.passed

    def to_dict(self) -> dict[str, Any]:
        """The report's per-shape ``accuracy`` entry."""
        if self.comparison is None:
            return {"checked": False, "unchecked": self.unchecked, "ratio_limit": RATIO_LIMIT}
        figures = self.comparison.to_dict()
        figures.pop("rung")
        eager: dict[str, Any] = {}
        if self.eager is not None:
            eager = {
                "eager_rounding_units": _finite(self.eager.ratio),
                "eager_limit": EAGER_LIMIT,
                "eager_wrong": self.eager.wrong,
            }
        return {"checked": True, "ratio_limit": RATIO_LIMIT, **figures, **eager}


def copy_tensors(value: Any) -> Any:
    """``value`` with each tensor in it copied (the rest as is)."""
    from torch.utils._pytree import tree_map

    return tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, value)


class Reference:
    """Eager references of one model: as it serves (its own dtype) and a float64 copy, made on first use.

    Args:
        model: The model the build compiles (an ``nn.Module`` or a plain callable, run as is in fp64 with its
            floating inputs promoted).
    """

    def __init__(self, model: Any) -> None:
        self._model = model
        self._fp64: Any = None
        self._fp64_error = ""

    def _fp64_model(self) -> Any:
        if self._fp64 is None and not self._fp64_error:
            try:
                # Outside inference mode (qualification calls in it): a copy made inside holds inference tensors,
                # which nn.Parameter refuses.
                with torch.inference_mode(False):
                    self._fp64 = fp64_model(self._model)
            except Exception as exc:  # a module that cannot be copied: left unchecked, said why
                self._fp64_error = f"no float64 copy of the model: {error_line(exc)}"
        return self._fp64

    def check(self, compiled_output: Any, inputs: tuple[Any, ...]) -> ShapeAccuracy:
        """Judge ``compiled_output`` (the compiled model's on ``inputs``, as they were before that call: each
        reference runs on its own copy of them); never raises."""
        if not float_leaves(compiled_output):  # token ids, argmax, masks: the rule compares floating tensors only
            return ShapeAccuracy(
                None, "the output holds no floating-point tensor to compare, only integer or bool ones"
            )
        model64 = self._fp64_model()
        if model64 is None:
            return ShapeAccuracy(None, self._fp64_error)
        try:
            reference = model64(*to_fp64(inputs))
        except Exception as exc:
            return ShapeAccuracy(None, f"the model does not run in float64: {error_line(exc)}")
        try:
            eager = self._model(*copy_tensors(inputs))
        except Exception as exc:
            return ShapeAccuracy(None, f"eager raised where the compiled model ran: {error_line(exc)}")
        return ShapeAccuracy(
            compare("compiled", compiled_output, reference, eager), eager=check_eager(eager, reference)
        )

    def release(self) -> None:
        """Drop the float64 copy."""
        self._fp64 = None


def _finite(x: float) -> float | str:
    return x if math.isfinite(x) else str(x)


def _num(x: float) -> str:
    return f"{x:.3g}"


def refusal(
    results: Sequence[tuple[tuple[int, ...], ShapeAccuracy | None]], customisations: Sequence[str]
) -> BundleError | None:
    """The one-line refusal of a build whose compiled output is outside tolerance at some shape, else ``None``.

    Names the worst shape and its figures, how many shapes fail, and what to do: the customisations first
    (``op=module:function``, the usual cause), then replay's in-process investigation, which names the op.

    Args:
        results: Each qualified shape and its accuracy (``None`` or unchecked entries never refuse).
        customisations: The build's customisations, as ``target=import_path``.
    """
    judged = [(shape, acc.comparison) for shape, acc in results if acc is not None and acc.comparison is not None]
    failed = [(shape, c) for shape, c in judged if not c.passed]
    if not failed:
        return None
    shape, c = max(failed, key=lambda f: f[1].ratio)
    structure = next((str(w["error"]) for w in c.worst if "error" in w), "")
    if structure:
        what = f"its {structure} from eager's"
    elif c.nonfinite_new:
        what = f"{c.nonfinite_new} non-finite value(s) where eager and fp64 are finite"
    else:
        what = (
            f"error ratio {_num(c.ratio)} against eager's own error vs fp64, limit {RATIO_LIMIT:g} "
            f"(max abs error {_num(c.max_abs)}, eager's {_num(c.anchor_max_abs)})"
        )
    count = f"{len(failed)} of {len(judged)} shapes fail" if len(failed) > 1 else f"1 of {len(judged)} shapes fails"
    todo = "run inferensics.replay.investigate(model, inputs) on that shape to name the op"
    if customisations:
        todo = f"check the customisations ({', '.join(customisations)}), or {todo}"
    return BundleError(
        "inaccurate",
        f"compiled output of shape {list(shape)} is numerically wrong: {what}; {count}; nothing was signed: "
        f"{todo}, or pass --allow-inaccurate to sign it anyway",
    )
