"""A refused query (400) reads on the dashboard as the command line says it (``query_runner.service_line``): the
service's words, nothing cut. The page cut a leading ``word: `` as if it were the query's name, which the client
already takes off, so a refusal that opened with the parameter's name lost it."""

from __future__ import annotations

import pytest

from inferensics.cli.query_runner import service_line
from inferensics.collector.client import ServiceClient, ServiceError
from inferensics.dashboard._internal.service import said
from tests.loopback import refusing, serving

REFUSED = "lookback_s: must be longer than quiet_after_s (60)"


def test_a_refusal_reads_on_the_dashboard_as_on_the_command_line() -> None:
    handler = refusing(REFUSED, name_first=True)
    with serving(handler) as url, ServiceClient(url, token="t") as client, pytest.raises(ServiceError) as caught:
        client.query("host_health", lookback_s=30)
    assert said(caught.value) == service_line(caught.value) == REFUSED
