"""The on-call dashboard: a Streamlit app that reads everything through the collector service's API.

Start it with ``inferensics dashboard [--port P] [--service URL] [--token T]`` (or ``inferensics serve
--with-dashboard``); from Python:

>>> from inferensics.dashboard import start_dashboard, wait_until_up          # doctest: +SKIP
>>> proc = start_dashboard(port=8501, service_url="http://127.0.0.1:4318", token="read-token")  # doctest: +SKIP
>>> wait_until_up("http://127.0.0.1:8501", proc)                                # doctest: +SKIP

The pages live in ``views/`` (one script each), the shared parts in ``_internal/``.
"""

from inferensics.dashboard.launcher import (
    APP_FILE,
    DEFAULT_PORT,
    dashboard_env,
    start_dashboard,
    streamlit_argv,
    wait_until_up,
)

__all__ = ["APP_FILE", "DEFAULT_PORT", "dashboard_env", "start_dashboard", "streamlit_argv", "wait_until_up"]
