"""The collector service: OTLP/HTTP in, typed rows through a durable spool into the store, query API out.

Run it with ``inferensics serve`` (or ``python -m inferensics.collector.service``); talk to it with
:class:`inferensics.collector.client.ServiceClient`.
"""

from inferensics.collector.errors import ConfigError
from inferensics.collector.service.app import create_app
from inferensics.collector.service.config import SETTINGS, ServiceConfig, Setting, load_config
from inferensics.collector.service.server import ListenError, listen, serve
from inferensics.collector.service.state import ServiceState, StartError, build_state

__all__ = [
    "SETTINGS",
    "ConfigError",
    "ListenError",
    "ServiceConfig",
    "ServiceState",
    "Setting",
    "StartError",
    "build_state",
    "create_app",
    "listen",
    "load_config",
    "serve",
]
