"""The storm rule the dashboard applies, one per session: the on-call overview's storm alerts and the Weekly
report page's reports find storms with it, so an hour that is a storm on one page is a storm on the other.

The rule is the analytics' :class:`~inferensics.analytics.storms.StormRule`, at its defaults until a floor is
lowered: a small fleet or a short demo has storms of a few recompiles (the demo prints its weekly report
command with ``--min-recompiles`` lowered to its storm). Both pages draw the same floor inputs, each page its
own (a widget belongs to the page that drew it: Streamlit forgets its value once a page without it runs), each
starting at the session's rule; a change that the rule accepts becomes the session's rule, kept under a key no
widget owns.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final, cast

import streamlit as st
from annotated_types import Ge, Gt
from pydantic import ValidationError

from inferensics.analytics.storms import StormRule
from inferensics.dashboard.launcher import STORM_FLOOR_ENV

if TYPE_CHECKING:
    from streamlit.delta_generator import DeltaGenerator

log = logging.getLogger(__name__)

RULE_KEY: Final = "storm.rule"
"""Session State key of the session's :class:`StormRule` (absent: :func:`started_rule`)."""
FLOORS: Final = {"min_recompiles": "Min recompiles an hour", "min_compile_seconds": "Min compile seconds an hour"}
"""The rule's floors the pages offer (``inferensics report weekly``'s options), by field, with their labels."""


def current_storm_rule() -> StormRule:
    """The session's storm rule: the one the dashboard started with until a page changes it."""
    rule = st.session_state.get(RULE_KEY)
    return rule if isinstance(rule, StormRule) else started_rule()


@functools.cache
def started_rule() -> StormRule:
    """The storm rule with the floors the dashboard was started with (``inferensics dashboard
    --min-recompiles``, passed in :data:`~inferensics.dashboard.launcher.STORM_FLOOR_ENV`), else the
    defaults. A floor the rule refuses is left at its default with one line in the dashboard's log."""
    floors = {name: os.environ[env] for name, env in STORM_FLOOR_ENV.items() if os.environ.get(env)}
    try:
        return StormRule.model_validate(floors)
    except ValidationError as exc:
        refused = {str(error["loc"][0]): error["msg"].lower() for error in exc.errors()}
        for name, why in refused.items():
            default = StormRule.model_fields[name].default
            log.warning(
                "inferensics dashboard: %s=%r: %s; the storm rule keeps its default %s",
                STORM_FLOOR_ENV[name], floors[name], why, default,
            )  # fmt: skip
        return StormRule.model_validate({k: v for k, v in floors.items() if k not in refused})


def floor_key(page: str, name: str) -> str:
    """The Session State key of ``page``'s input for the storm rule's field ``name``."""
    return f"{page}.{name}"


def floor_minimum(name: str) -> float | None:
    """The least value the storm rule's field ``name`` allows, from its constraints, as a number input's
    inclusive minimum of the field's type (Streamlit refuses an int default with a float minimum): ``gt=0`` is
    1 for an int field, and 0.0 for a float field, which the input cannot exclude (:func:`storm_rule` refuses
    it)."""
    field = StormRule.model_fields[name]
    for c in field.metadata:
        if isinstance(c, Ge):
            low, exclusive = cast(float, c.ge), False
        elif isinstance(c, Gt):
            low, exclusive = cast(float, c.gt), True
        else:
            continue
        return int(low) + exclusive if isinstance(field.default, int) else float(low)
    return None


def _adopt(page: str) -> None:
    """``page``'s floors become the session's rule when the rule accepts them; else the last rule stays (the
    page names what it refuses)."""
    keys = {name: floor_key(page, name) for name in FLOORS}
    floors = {name: st.session_state[key] for name, key in keys.items() if key in st.session_state}
    with contextlib.suppress(ValidationError):
        st.session_state[RULE_KEY] = StormRule.model_validate({**current_storm_rule().model_dump(), **floors})


def floor_inputs(page: str, cells: Sequence[DeltaGenerator]) -> dict[str, float]:
    """``page``'s number input per floor (in ``cells``, in :data:`FLOORS`' order) starting at the session's
    rule, with the rule's minimums, stepping by one (a float's hundredths are Streamlit's default step, and no
    floor is tuned that finely); returns their values by field."""
    rule = current_storm_rule()
    values: dict[str, float] = {}
    for where, name in zip(cells, FLOORS, strict=True):
        key = floor_key(page, name)
        if key not in st.session_state:  # first drawn, or forgotten while another page ran
            st.session_state[key] = getattr(rule, name)
        whole = isinstance(StormRule.model_fields[name].default, int)
        values[name] = where.number_input(
            FLOORS[name],
            min_value=floor_minimum(name),
            step=1 if whole else 1.0,
            format=None if whole else "%g",
            key=key,
            on_change=_adopt,
            args=(page,),
            help="The storm rule's floor: an hour of one model and pool needs at least this many to be a storm "
            "(a storm by its compile seconds needs the recompile floor too: first compiles count in them). "
            "A small fleet or a short demo lowers it (as `inferensics report weekly`'s option does); the on-call "
            "overview and the Weekly report page apply the same rule.",
        )
    return values


def storm_rule(floors: dict[str, float], then: str) -> StormRule | None:
    """The storm rule with ``floors`` (by field); ``None`` after showing, for each floor it refuses, what is
    wrong and ``then`` (what to do next)."""
    try:
        return StormRule.model_validate({**current_storm_rule().model_dump(), **floors})
    except ValidationError as exc:
        for error in exc.errors():
            name = str(error["loc"][0])
            st.error(f"{FLOORS.get(name, name)}: {error['msg'].lower()}. {then}")
        return None
