"""The demo says a refusal (400) of a running service in the service's words, as the command line does
(``ServiceError.line``): it read ``POST /api/v1/sql: 400 ...`` before them."""

from __future__ import annotations

import pytest

from inferensics.demo.runner import DemoError, _check_token
from tests.loopback import refusing, serving

REFUSED = "query failed: Code: 60. DB::Exception: Unknown table expression identifier"


def test_a_refusal_of_the_running_service_reads_in_its_words() -> None:
    with serving(refusing(REFUSED)) as url, pytest.raises(DemoError) as caught:
        _check_token(url, "t")
    assert str(caught.value).startswith(f"{REFUSED}; the demo sends, pushes and reads its run back"), caught.value
