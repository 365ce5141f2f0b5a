"""``Registry.apply_policy``: an entry this process cannot take is named and left out, and every other entry of
the same op (its default list, each bucket's list, each refusal) is applied."""

from __future__ import annotations

from typing import Any

import pytest

from inferensics import kernels

BUCKETS = ("float32/n64/t4", "float32/n64/t8", "float32/n64/t16")


@pytest.mark.usefixtures("restored_registry")
def test_one_bad_bucket_leaves_the_ops_other_buckets_and_refusals_applied() -> None:
    reg = kernels.registry()
    op = reg.op("rms_norm")
    op.bucket_priority.clear()
    op.refused.clear()
    policy: dict[str, Any] = {
        "rms_norm": {
            "priority": ["inductor"],
            "bucket_priority": {BUCKETS[0]: ["inductor"], BUCKETS[1]: ["no_such_provider"], BUCKETS[2]: ["inductor"]},
            "refused": [
                {"bucket": BUCKETS[0], "provider": "inductor", "reason": "planted"},
                {"bucket": BUCKETS[2]},  # malformed: no provider, no reason
                {"bucket": BUCKETS[2], "provider": "inductor", "reason": "planted too"},
            ],
        }
    }
    problems = reg.apply_policy(policy)
    assert len(problems) == 2, problems
    assert problems[0].startswith(f"rms_norm: bucket {BUCKETS[1]}: unknown providers ['no_such_provider']")
    assert problems[1].startswith("rms_norm: refusal 1: malformed policy")
    assert op.priority == ["inductor", "reference"]
    assert op.bucket_priority == {BUCKETS[0]: ["inductor", "reference"], BUCKETS[2]: ["inductor", "reference"]}
    assert op.refused == {(BUCKETS[0], "inductor"): "planted", (BUCKETS[2], "inductor"): "planted too"}


@pytest.mark.usefixtures("restored_registry")
def test_a_bad_default_list_leaves_the_buckets_applied_and_malformed_parts_are_named() -> None:
    reg = kernels.registry()
    op = reg.op("silu_mul")
    before = list(op.priority)
    problems = reg.apply_policy(
        {
            "silu_mul": {"priority": ["nope"], "bucket_priority": {BUCKETS[0]: ["inductor"]}},
            "rms_norm": {"bucket_priority": ["not", "an", "object"], "refused": {"not": "an array"}},
            "fused_add_rms_norm": "not an object",
            "no_op": {},
        }
    )
    assert problems == [
        f"silu_mul: unknown providers ['nope']; registered: {sorted(op.providers)}",
        "rms_norm: malformed policy (bucket_priority is not an object: ['not', 'an', 'object'])",
        "rms_norm: malformed policy (refused is not an array: {'not': 'an array'})",
        "fused_add_rms_norm: malformed policy (not an object: 'not an object')",
        "unknown op 'no_op'",
    ]
    assert op.priority == before
    assert op.bucket_priority[BUCKETS[0]] == ["inductor", "reference"]
