"""The Streamlit entry script of the on-call dashboard: page setup, service check, filters, navigation.

Run it with ``inferensics dashboard`` (which calls ``streamlit run`` on this file headless), never by
importing it: Streamlit executes it on every interaction.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from inferensics.collector.client import ServiceError
from inferensics.dashboard._internal import queries
from inferensics.dashboard._internal.filters import (
    apply_linked_filters,
    apply_pending_filters,
    current_filters,
    end_param_problem,
    filter_sidebar,
)
from inferensics.dashboard._internal.options import filter_options
from inferensics.dashboard._internal.service import (
    QueryCall,
    check_service,
    error_panel,
    prefetch,
    service_errors,
    token_fingerprint,
)
from inferensics.dashboard._internal.settings import current_settings
from inferensics.dashboard.navigation import PAGES

HERE = Path(__file__).resolve().parent

st.set_page_config(
    page_title="inferensics", page_icon=":material/search:", layout="wide", initial_sidebar_state="expanded"
)

sections: dict[str, list[st.Page]] = {}
for spec in PAGES:
    page = st.Page(
        str(HERE / spec.file),
        title=spec.title,
        url_path=spec.url_path,
        icon=spec.icon,
        default=spec.url_path == "overview",
    )
    sections.setdefault(spec.section, []).append(page)
navigation = st.navigation(sections)

settings = current_settings()
with st.sidebar:
    st.caption(f"Service `{settings.service_url}` · token {token_fingerprint(settings.token)}")
current = next((p for p in PAGES if p.url_path == navigation.url_path), PAGES[0])
if current.filtered:
    apply_linked_filters()  # a link's ?host=...; a button's pending filters (next line) come after, and win
apply_pending_filters()
# Everything the run will ask the service goes out now, at once: the service check, the filter values and
# the page's own queries (the calls below wait for the answers in flight instead of asking one after the
# other, and the page draws its title meanwhile).
calls: list[QueryCall] = [(queries.DIMENSION_VALUES, {})] if current.filtered else []
if current.queries is not None:
    calls.extend(current.queries(current_filters()).values())
prefetch(*calls, health=True, wait=False)
try:
    health = check_service()
except ServiceError as exc:
    st.title("inferensics")
    error_panel(exc)
    st.stop()
if not health.get("ready", False):
    st.warning(
        f"The service is up but its store is not ready ({health.get('last_error') or 'starting'}); "
        "numbers may be missing until it recovers.",
        icon=":material/hourglass_top:",
    )
if (end_problem := end_param_problem()) is not None:
    st.warning(end_problem, icon=":material/schedule:")

if current.filtered:
    with service_errors():
        options = filter_options()
    filter_sidebar(options.models, options.pools, options.traffic_classes, options.bundles, options.hosts)
navigation.run()
