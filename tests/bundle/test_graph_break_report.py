"""The qualification report places a graph break in the user's code and gives Dynamo's reason for it.

Every break used to read ``exc.py:727`` (torch's innermost frame, where Dynamo raises ``Unsupported``) with
"Graph break in user code at ..." as its reason.
"""

from __future__ import annotations

import shutil

import pytest

from inferensics.bundle.graph_breaks import is_user_file
from inferensics.bundle.qualify import run_policy
from tests.bundle.break_models import break_line, item_branch
from tests.bundle.models import inputs

pytestmark = pytest.mark.slow


def test_a_break_is_named_at_the_users_line_with_dynamos_reason() -> None:
    shapes = [((2, 8), (2, 8)), ((3, 8), (3, 8))]  # the second shape recompiles and breaks at the same place
    run = run_policy("static", item_branch(), inputs, shapes, compile_args={"dynamic": False}, config_patches={},
                     repeats=1)  # fmt: skip
    shutil.rmtree(run.cache_dir, ignore_errors=True)
    assert run.graph_breaks == [
        {
            "where": f"break_models.py:{break_line()}",
            "reason": "Unsupported Tensor.item() call with capture_scalar_outputs=False",
            "explanation": "Dynamo does not support tracing `Tensor.item()` with config.capture_scalar_outputs=False.",
            "registry_id": "GB0124",
        }
    ]


def test_torch_and_installed_packages_are_not_the_users_code() -> None:
    import torch

    assert not is_user_file(torch.__file__)
    assert not is_user_file("/usr/lib/python3/dist-packages/numpy/core.py")
    assert not is_user_file("<frozen runpy>")
    assert is_user_file(__file__)
