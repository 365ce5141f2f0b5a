"""A dynamic bundle's hit at a shape the bundle never qualified is flagged at serve time.

A graph compiled with symbolic sizes serves every size its guards admit: a request at a size the build never ran
is a bundle hit, served by the signed artifact, and nothing said so until replay named it
``shape_specialization``. The build now records, per graph, the sizes qualification served; the session counts
each call a hit serves at other sizes (``stats()``, by shape) and tells ``on_unqualified_shape`` inside the call,
where the host SDK marks the request being served.
"""

from __future__ import annotations

import contextvars
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from inferensics import bundle as b
from inferensics.bundle import torch_adapter
from tests.bundle.conftest import Keys, spec
from tests.bundle.models import inputs, tiny_mlp

pytestmark = pytest.mark.slow

QUALIFIED = b.ShapeDistribution.of([(2, 8), (3, 8)], [3, 1])
REQUEST: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar("request", default=None)
"""The request being served, as the host SDK's ``CURRENT`` holds it."""


@pytest.fixture(scope="module")
def dynamic(keys: Keys, tmp_path_factory: pytest.TempPathFactory) -> b.BuildResult:
    """The tiny MLP built with dynamic shapes on batch sizes 2 and 3."""
    return b.build(spec(dynamic=True, shapes=QUALIFIED), keys.key, tmp_path_factory.mktemp("dynamic") / "bundle")


@pytest.fixture
def loaded(dynamic: b.BuildResult, keys: Keys, tmp_path: Path) -> Iterator[b.LoadedBundle]:
    """The dynamic bundle loaded in this process, into an empty cache directory."""
    saved = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(tmp_path / "cache")
    try:
        with torch_adapter.compiler_state_restored():
            torch_adapter.reset_compiler()
            yield b.load(dynamic.directory, keys.keyring)
    finally:
        if saved is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = saved


def test_the_build_records_the_sizes_each_dynamic_graph_was_qualified_at(dynamic: b.BuildResult) -> None:
    (graph,) = dynamic.manifest.graphs  # one graph with a symbolic batch size serves both shapes
    assert "sym:" in graph.inputs
    assert graph.qualified_shapes == ["[2,8]", "[3,8]"]
    assert dynamic.manifest.accepted_shapes == [[2, 8], [3, 8]]


def _marking_session(loaded: b.LoadedBundle, seen: list[b.UnqualifiedShape]) -> b.BundleSession:
    """A session whose callback marks the request being served, as the host SDK's does."""

    def mark(served: b.UnqualifiedShape) -> None:
        seen.append(served)
        request = REQUEST.get()
        if request is not None:
            request["bundle_unqualified_shape"] = served.shape

    return loaded.session(on_bundle_miss="refuse", on_unqualified_shape=mark)


def _serve(compiled: Callable[..., Any], shapes: list[tuple[int, int]]) -> list[dict[str, str]]:
    """Serve one request per shape; each request's marks."""
    requests = []
    with torch.inference_mode():
        for shape in shapes:
            request: dict[str, str] = {}
            token = REQUEST.set(request)
            try:
                compiled(*inputs(shape))
            finally:
                REQUEST.reset(token)
            requests.append(request)
    return requests


def _host_backend(session: b.BundleSession, patches: dict[str, Any]) -> Callable[..., Any]:
    """A backend of the host SDK's kind: its compile step goes through ``session.serve_graph``."""

    def backend(gm: Any, example_inputs: list[Any]) -> Callable[..., Any]:
        served, _ = session.serve_graph(
            gm, example_inputs, lambda: torch_adapter.compile_fx(gm, example_inputs, patches)
        )
        return served

    return backend


@pytest.mark.parametrize("path", ["session backend", "host serve_graph"])
def test_a_hit_at_an_unqualified_shape_is_counted_and_marks_its_request(
    loaded: b.LoadedBundle, dynamic: b.BuildResult, path: str
) -> None:
    seen: list[b.UnqualifiedShape] = []
    session = _marking_session(loaded, seen)
    if path == "session backend":
        compiled = loaded.compile(tiny_mlp(), session)
    else:
        compiled = torch.compile(tiny_mlp(), backend=_host_backend(session, loaded.config_patches), dynamic=True)
    requests = _serve(compiled, [(2, 8), (5, 8), (3, 8), (5, 8), (7, 8)])

    (graph,) = dynamic.manifest.graphs
    assert [(m.status, m.fx_key) for m in session.matches] == [("hit", graph.fx_key)]  # one artifact served all
    assert requests == [
        {},
        {"bundle_unqualified_shape": "[5,8]"},
        {},
        {"bundle_unqualified_shape": "[5,8]"},
        {"bundle_unqualified_shape": "[7,8]"},
    ]
    assert session.stats() == {
        "bundle_hit_graphs": 1,
        "bundle_miss_graphs": 0,
        "unqualified_shape_calls": 3,
        "unqualified_shapes": {"[5,8]": 2, "[7,8]": 1},
    }
    assert seen[0] == b.UnqualifiedShape(graph.signature, graph.fx_key, "[5,8]", ("[2,8]", "[3,8]"))


def test_a_failing_callback_does_not_fail_the_request(loaded: b.LoadedBundle) -> None:
    def broken(served: b.UnqualifiedShape) -> None:
        raise RuntimeError(served.shape)

    session = loaded.session(on_unqualified_shape=broken)
    compiled = loaded.compile(tiny_mlp(), session)
    with torch.inference_mode():
        out = compiled(*inputs((6, 8)))
    assert out.shape == (6, 4)
    assert session.stats()["unqualified_shapes"] == {"[6,8]": 1}


def test_show_and_verify_write_the_qualified_shapes_in_the_hosts_notation(dynamic: b.BuildResult, keys: Keys) -> None:
    """Input shapes as the request page writes them (``2x8``), a dynamic graph's sizes as a host's unqualified-shape
    count and ``attrs['bundle_unqualified_shape']`` do (``[2,8]``), each named for what it is."""
    from typer.testing import CliRunner

    from inferensics.cli.app import app

    qualified = "qualified: input shapes 2x8, 3x8; graph sizes [2,8], [3,8]"
    shown = CliRunner().invoke(app, ["bundle", "show", str(dynamic.directory)])
    assert shown.exit_code == 0, shown.output
    assert f"  {qualified}" in shown.output.splitlines(), shown.output
    (graph,) = dynamic.manifest.graphs
    assert f"graph {graph.fx_key[:16]} code " in shown.output
    assert f" qualified at graph sizes [2,8], [3,8] inputs {graph.inputs}" in shown.output, shown.output
    verified = CliRunner().invoke(app, ["bundle", "verify", str(dynamic.directory), "--keyring", str(keys.public)])
    assert verified.exit_code == 0, verified.output
    assert qualified in verified.output.splitlines(), verified.output
