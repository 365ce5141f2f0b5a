"""``bundle`` commands given bad input answer in one line that says what to pass: a customisation without its
``module:name`` (the line used to show a model factory's example), a file that is no packed bundle (the line used to
list every compression codec tar tried)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bundle.conftest import INPUTS, MODEL, SHAPES, Keys, one_line_error


def _build_args(keys: Keys, tmp_path: Path) -> list[str]:
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps(SHAPES.to_json()))
    return ["bundle", "build", "--model", MODEL, "--inputs", INPUTS, "--shapes", str(shapes), "--key",
            str(keys.private), "--out", str(tmp_path / "out"), "--no-advise"]  # fmt: skip


@pytest.mark.parametrize(
    ("option", "value", "said"),
    [
        (
            "--fx-pass",
            "nonsense",
            "error: --fx-pass 'nonsense': expected [SLOT=]module:name "
            "(post_grad_custom_post_pass=mypkg.passes:my_pass)",
        ),
        ("--fx-pass", "post_grad_custom_post_pass=nonsense", "expected [SLOT=]module:name"),
        (
            "--decomposition",
            "aten.gelu.default=nonsense",
            "error: --decomposition 'aten.gelu.default=nonsense': "
            "expected OP=module:function "
            "(aten.gelu.default=mypkg.decomps:fast_gelu)",
        ),
    ],
)
def test_a_customisation_without_module_and_name_says_the_form(
    keys: Keys, tmp_path: Path, option: str, value: str, said: str
) -> None:
    text = one_line_error([*_build_args(keys, tmp_path), option, value], said)
    assert "mypkg.models:build" not in text, text  # a model factory's example, not a pass's or decomposition's
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", [["show"], ["unpack", "--out", "unpacked"], ["diff", "{file}"]])
def test_a_file_that_is_no_packed_bundle_is_named_in_one_line(tmp_path: Path, command: list[str]) -> None:
    file = tmp_path / "shapes.json"
    file.write_text("[[2, 8]]")
    rest = [str(tmp_path / a) if a == "unpacked" else a.format(file=file) for a in command[1:]]
    one_line_error(
        ["bundle", command[0], str(file), *rest],
        f"error: {file} is not a packed bundle (not a tar file; `inferensics bundle pack` writes one) [damaged]",
    )
