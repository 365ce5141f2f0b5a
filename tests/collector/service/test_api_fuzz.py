"""Schemathesis against the service's own OpenAPI document: no generated input makes the API answer 5xx,
and every answer conforms to the documented responses.

(Schemathesis's pytest plugin does not load under this pytest, so each operation's hypothesis strategy is
driven directly.)
"""

from __future__ import annotations

import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from inferensics.collector.service import ServiceState, create_app
from tests.collector.service.harness import ADMIN


def test_no_input_causes_a_server_error(app_state: ServiceState) -> None:
    schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(app_state))
    operations = [result.ok() for result in schema.get_all_operations()]  # type: ignore[union-attr]
    assert len(operations) >= 10, [o.label for o in operations]
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def check(case: schemathesis.Case) -> None:  # type: ignore[type-arg]
            case.call_and_validate(
                headers={"Authorization": f"Bearer {ADMIN}"},
                checks=[not_a_server_error, response_schema_conformance],
            )

        check()
