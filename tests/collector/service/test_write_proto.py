"""``python -m inferensics.collector.service --write-proto DIR``: the schema a ClickHouse server reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from inferensics.collector.service.__main__ import main
from inferensics.collector.service.otlp_proto import PROTO_FILE, render_proto


def test_write_proto_writes_the_rendered_schema_and_exits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--write-proto", str(tmp_path / "schemas")]) == 0
    written = tmp_path / "schemas" / PROTO_FILE
    assert written.read_text() == render_proto()
    assert capsys.readouterr().out.strip() == str(written)


def test_write_proto_into_an_unwritable_place_says_so_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    assert main(["--write-proto", str(blocker / "schemas")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: cannot write the schema into {blocker / 'schemas'}:")
    assert "\n" not in err
