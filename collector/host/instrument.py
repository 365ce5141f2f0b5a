"""``instrument(...)``: the one call that turns the SDK on in a serving process."""

from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING

from inferensics.collector.errors import ConfigError
from inferensics.collector.host.config import SdkConfig
from inferensics.collector.host.exporter import Exporter
from inferensics.collector.host.process_lifecycle import replace_active
from inferensics.collector.host.request_tracker import Tracker
from inferensics.collector.service_url import SERVICE_URL_ENV, TOKEN_ENV, service_url_problem

if TYPE_CHECKING:
    from inferensics.schema.store import Store


def instrument(
    service_url: str | None = None,
    store: Store | None = None,
    *,
    host: str | None = None,
    hw_pool: str = "",
    model: str = "",
    bundle_id: str = "",
    traffic_class: str = "",
    token: str | None = None,
    config: SdkConfig | None = None,
    exporter: Exporter | None = None,
) -> Tracker:
    """Start the host SDK and return the process's :class:`Tracker`.

    Exactly one destination: ``exporter`` (any :class:`Exporter`), else ``store`` (direct inserts, for
    single-process use and tests), else ``service_url`` or ``$INFERENSICS_SERVICE_URL`` (OTLP/HTTP spans
    plus the blob API, bearer ``token`` or ``$INFERENSICS_TOKEN``). A second call replaces the first.

    Raises:
        ConfigError: no destination was given, or the service URL is not an http(s) URL with a host.
    """
    cfg = config or SdkConfig.from_env()
    name = host or socket.gethostname()
    if exporter is None:
        if store is not None:
            from inferensics.collector.host.store_exporter import StoreExporter

            exporter = StoreExporter(store, host=name, batch_rows=cfg.batch_rows)
        else:
            url = service_url or os.environ.get(SERVICE_URL_ENV)
            if not url:
                raise ConfigError(
                    "instrument() needs a destination: pass service_url=, store= or exporter=, "
                    f"or set ${SERVICE_URL_ENV}"
                )
            problem = service_url_problem(url)
            if problem:
                origin = "service_url" if service_url else f"${SERVICE_URL_ENV}"
                raise ConfigError(f"{origin} {url!r}: {problem}")
            from inferensics.collector.host.otlp_exporter import OtlpExporter

            exporter = OtlpExporter(url, host=name, token=token or os.environ.get(TOKEN_ENV))
    chosen = exporter
    return replace_active(
        lambda: Tracker(
            chosen,
            host=name,
            hw_pool=hw_pool,
            model=model,
            bundle_id=bundle_id,
            traffic_class=traffic_class,
            config=cfg,
        )
    )
