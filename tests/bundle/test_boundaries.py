"""Every bundle boundary refuses bad input in one line that says what is wrong and what to do, keeps nothing
half-made and leaks no temporary folder: states files, ``--device``, factories, ``--option``, pack and unpack
targets, an uninitialised store, a push token without the admin role, ``verify`` of a bundle whose
customisation lives beside the user."""

from __future__ import annotations

import importlib
import json
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from inferensics import bundle as b
from inferensics.bundle import factors
from inferensics.bundle.manifest import MANIFEST_FILE
from inferensics.bundle.states import STATES_ENV
from inferensics.cli.app import app
from inferensics.schema.store import Store
from tests.bundle.conftest import Keys, copy_bundle, one_line_error, tar_folder
from tests.bundle.resign import resign
from tests.seeding import scratch_dsn

runner = CliRunner()


@pytest.fixture
def scratch_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The folder :mod:`tempfile` makes its folders in during the test (to see what a command leaves there)."""
    d = tmp_path / "scratch-tmp"
    d.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(d))
    return d


# --- states files -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ('{"revoke": ["ab"]}', "unknown key 'revoke'"),
        ('{"revoked": "abab"}', "'revoked' is not a list of bundle id strings"),
        ('{"quarantined": [1, 2]}', "'quarantined' is not a list of bundle id strings"),
        ('["abab"]', "its top level is a JSON array"),
        ("not json", "it is not JSON"),
    ],
)
def test_a_states_file_of_another_shape_is_refused(tmp_path: Path, content: str, needle: str) -> None:
    """A typo'd key or a string where a list belongs was read as "nothing refused": a revoked bundle verified
    and loaded."""
    path = tmp_path / "st.json"
    path.write_text(content)
    with pytest.raises(b.BundleError) as err:
        b.BundleStates.load(path)
    assert err.value.cause == "damaged"
    assert needle in str(err.value)
    assert "inferensics bundle states" in str(err.value) or needle == "it is not JSON"


def test_a_states_file_of_the_right_shape_loads(tmp_path: Path) -> None:
    path = tmp_path / "st.json"
    path.write_text('{"revoked": ["ab"]}')
    assert b.BundleStates.load(path) == b.BundleStates(revoked=frozenset({"ab"}))


@pytest.mark.slow
def test_verify_and_load_refuse_a_misspelt_states_file(
    built: b.BuildResult, keys: Keys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "st.json"
    path.write_text(json.dumps({"revoke": [built.bundle_id]}))
    args = ["bundle", "verify", str(built.directory), "--keyring", str(keys.public), "--states", str(path)]
    one_line_error(args, "unknown key 'revoke'")
    monkeypatch.setenv(STATES_ENV, str(path))
    with pytest.raises(b.BundleError, match="unknown key 'revoke'"):
        b.load(built.directory, keys.keyring)


# --- --device ---------------------------------------------------------------------------------------------


def test_a_device_this_host_lacks_is_one_error() -> None:
    """``torch.device("tpu")`` and ``torch.cuda.current_device()`` on a CPU-only torch were tracebacks."""
    with pytest.raises(b.BundleError, match="expected cpu or cuda") as err:
        factors.compatibility("tpu")
    assert err.value.cause == "bad_input"
    if not torch.cuda.is_available():
        with pytest.raises(b.BundleError, match="no CUDA device: pass --device cpu"):
            factors.compatibility("cuda")


@pytest.mark.slow
def test_verify_on_a_device_this_host_lacks_is_one_line(built: b.BuildResult, keys: Keys) -> None:
    args = ["bundle", "verify", str(built.directory), "--keyring", str(keys.public), "--device"]
    one_line_error([*args, "tpu"], "--device 'tpu': expected cpu or cuda")
    if not torch.cuda.is_available():
        one_line_error([*args, "cuda"], "--device cuda but this machine has no CUDA device: pass --device cpu")


# --- verify imports customisations from the working directory ------------------------------------------------


@pytest.mark.slow
def test_verify_imports_a_customisation_from_the_working_directory(
    built: b.BuildResult, keys: Keys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bundle built with ``--decomposition aten.silu.default=model2:bad_silu`` in its folder was refused by
    ``bundle verify`` there ("cannot be imported here: No module named 'model2'"): build imports from the
    working directory, verify did not."""
    here = tmp_path / "work"
    here.mkdir()
    (here / "walk_decomp.py").write_text("def bad_silu(x):\n    return x\n")
    d = copy_bundle(built, tmp_path)
    monkeypatch.chdir(here)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(here))])
    monkeypatch.delitem(sys.modules, "walk_decomp", raising=False)
    sys.path.insert(0, str(here))
    try:
        fn = importlib.import_module("walk_decomp").bad_silu
        c = b.describe_customisation("decomposition", "aten.silu.default", fn)
    finally:
        sys.path.remove(str(here))
        monkeypatch.delitem(sys.modules, "walk_decomp", raising=False)
    resign(d, keys.key, lambda i: i.__setitem__("customisations", [c.model_dump()]))
    res = runner.invoke(app, ["bundle", "verify", str(d), "--keyring", str(keys.public)])
    monkeypatch.delitem(sys.modules, "walk_decomp", raising=False)
    assert res.exit_code == 0, res.output
    assert "verified tiny" in res.output


# --- build: factories and options ---------------------------------------------------------------------------


@pytest.fixture
def build_args(keys: Keys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """``bundle build`` arguments up to ``--model``, in a folder holding ``walk_factories.py``."""
    (tmp_path / "walk_factories.py").write_text(
        "import torch\n\n\ndef boom():\n    raise RuntimeError('weights not found')\n\n\n"
        "def answer():\n    return 42\n\n\ndef linear():\n    return torch.nn.Linear(8, 4)\n"
    )
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps(b.ShapeDistribution.of([(2, 8)], [1]).to_json()))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "walk_factories", raising=False)
    return ["bundle", "build", "--shapes", str(shapes), "--key", str(keys.private), "--out", str(tmp_path / "out"),
            "--no-advise"]  # fmt: skip


def test_a_factory_that_raises_is_one_line(build_args: list[str], tmp_path: Path) -> None:
    one_line_error(
        [*build_args, "--model", "walk_factories:boom"],
        "error: --model walk_factories:boom raised RuntimeError: weights not found [bad_input]",
    )
    one_line_error(
        [*build_args, "--model", "walk_factories:linear", "--model-arg", "width=3"],
        "--model walk_factories:linear raised TypeError: linear() got an unexpected keyword argument 'width'; "
        "check its --model-arg values",
    )
    assert not (tmp_path / "out").exists()


def test_a_factory_returning_no_model_is_named(build_args: list[str], scratch_tmp: Path) -> None:
    """A factory returning 42 was blamed on the shapes ("fix the shapes file or the inputs function")."""
    text = one_line_error([*build_args, "--model", "walk_factories:answer"], "returned int '42'")
    assert "not a torch.nn.Module or a callable" in text
    assert "shapes" not in text
    assert list(scratch_tmp.iterdir()) == []


def test_an_unknown_inductor_option_is_one_line(build_args: list[str]) -> None:
    """``--option no_such_option=1`` was a 91-line BackendCompilerFailed from inside the first compile."""
    one_line_error(
        [*build_args, "--model", "walk_factories:linear", "--option", "no_such_option=1"],
        "--option no_such_option: Inductor",
    )
    text = one_line_error(
        [*build_args, "--model", "walk_factories:linear", "--option", "max_autotun=1"], "has no such option"
    )
    assert "did you mean max_autotune?" in text


@pytest.mark.slow
def test_a_failed_build_leaves_no_compile_cache(keys: Keys, tmp_path: Path, scratch_tmp: Path) -> None:
    """A build whose compile failed left its /tmp/inferensics-bundle-cache-* folder behind."""
    shapes = tmp_path / "shapes.json"
    shapes.write_text('{"shapes": [{"shape": [2, 8]}, {"shape": [2, 5]}]}')
    args = ["bundle", "build", "--model", "tests.bundle.models:tiny_mlp", "--inputs", "tests.bundle.models:inputs",
            "--shapes", str(shapes), "--key", str(keys.private), "--out", str(tmp_path / "o"),
            "--no-advise"]  # fmt: skip
    one_line_error(args, "the model cannot run shape [2, 5]")
    assert list(scratch_tmp.iterdir()) == []


# --- pack and unpack ----------------------------------------------------------------------------------------


@pytest.fixture
def packed(tmp_path: Path) -> Path:
    """A tar of a folder holding a manifest (all unpack looks at; `bundle pack` refuses such a folder)."""
    d = tmp_path / "fake"
    d.mkdir()
    (d / MANIFEST_FILE).write_text("{}")
    (d / "artifacts").mkdir()
    (d / "artifacts" / "x.bin").write_bytes(b"x")
    return tar_folder(d, tmp_path / "fake.tar")


def test_pack_to_a_missing_folder_or_a_directory_is_one_line(packed: Path, tmp_path: Path) -> None:
    bundle = tmp_path / "fake"
    one_line_error(
        ["bundle", "pack", str(bundle), "--out", str(tmp_path / "nodir" / "sub" / "x.tar")],
        f"the folder {tmp_path / 'nodir' / 'sub'} does not exist: choose another --out",
    )
    one_line_error(["bundle", "pack", str(bundle), "--out", str(tmp_path)], "it is a directory: choose another --out")


def _tampered(built: b.BuildResult, tmp_path: Path) -> tuple[Path, str]:
    """A copy of the bundle with one line appended to a graph's output code (the new user's ``t1``)."""
    copy = copy_bundle(built, tmp_path)
    code = sorted(copy.glob("artifacts/graphs/*/output_code.py"))[0]
    code.write_text(code.read_text() + "print('not the signed code')\n")
    return copy, code.relative_to(copy).as_posix()


@pytest.mark.slow
def test_pack_refuses_a_bundle_whose_files_do_not_match_its_manifest(built: b.BuildResult, tmp_path: Path) -> None:
    """``bundle pack t1 --out t1.bundle`` packed a tampered folder without a word; the pack then diffed as the
    same identity as the good bundle. Each file is checked against the manifest's sha256 as it is packed."""
    copy, altered = _tampered(built, tmp_path)
    out = tmp_path / "t1.bundle"
    text = one_line_error(["bundle", "pack", str(copy), "--out", str(out)], "[tampered]")
    assert f"{altered} does not match its sha256 in the manifest (altered): nothing was packed" in text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle"]  # no pack, no partial file
    shutil.copyfile(built.directory / altered, copy / altered)
    (copy / "artifacts" / "extra.bin").write_bytes(b"x")
    one_line_error(["bundle", "pack", str(copy), "--out", str(out)], "artifacts/extra.bin is not in the manifest")
    (copy / "artifacts" / "extra.bin").unlink()
    ok = runner.invoke(app, ["bundle", "pack", str(copy), "--out", str(out)])
    assert ok.exit_code == 0, ok.output
    assert out.read_bytes() == b.pack(built.directory, tmp_path / "good.bundle").read_bytes()


@pytest.mark.slow
def test_diff_refuses_a_side_whose_files_do_not_match_its_manifest(built: b.BuildResult, tmp_path: Path) -> None:
    """``bundle diff t1.bundle bundles/mlp`` said "same identity (no factor differs)", rc 0, of a tampered pack:
    it compared manifests only. Each side's files are checked first, a directory or a packed file."""
    copy, altered = _tampered(built, tmp_path)
    packed = tar_folder(copy, tmp_path / "t1.bundle")
    for side in (packed, copy):
        for args in ([str(side), str(built.directory)], [str(built.directory), str(side)]):
            text = one_line_error(["bundle", "diff", *args], f"{side} is not intact: {altered} does not match")
            assert text.endswith("(`inferensics bundle verify` checks one; rebuild or pull it again) [tampered]")


@pytest.mark.slow
def test_pack_refuses_to_replace_an_existing_file_without_force(built: b.BuildResult, tmp_path: Path) -> None:
    """``bundle pack`` overwrote an existing --out file silently (unpack and qualify refuse theirs)."""
    out = tmp_path / "mine.bundle"
    out.write_text("keep me")
    one_line_error(
        ["bundle", "pack", str(built.directory), "--out", str(out)],
        f"{out} already exists: choose a new --out, or pass --force to replace it",
    )
    assert out.read_text() == "keep me"
    forced = runner.invoke(app, ["bundle", "pack", str(built.directory), "--out", str(out), "--force"])
    assert forced.exit_code == 0, forced.output
    assert b.read_manifest(b.unpack(out, tmp_path / "unpacked")).bundle_id == built.bundle_id


def test_unpack_blames_out_not_the_archive(packed: Path, tmp_path: Path) -> None:
    """An --out that is a file, or cannot be made, was said as the archive's fault ("not a packed bundle
    ([Errno 17] File exists)" [damaged], "does not exist" [missing])."""
    a_file = tmp_path / "a_file"
    a_file.write_text("keep me")
    text = one_line_error(
        ["bundle", "unpack", str(packed), "--out", str(a_file)], "is not a folder: choose a new --out"
    )
    assert str(packed) not in text
    assert a_file.read_text() == "keep me"
    text = one_line_error(
        ["bundle", "unpack", str(packed), "--out", str(a_file / "sub")], f"cannot create {a_file / 'sub'}"
    )
    assert "[bad_input]" in text
    assert str(packed) not in text


def test_unpack_refuses_a_folder_with_files_in_it(packed: Path, tmp_path: Path) -> None:
    """Unpacking merged into a non-empty folder: the bundle then failed verify as tampered."""
    out = tmp_path / "full"
    out.mkdir()
    (out / "mine.txt").write_text("mine")
    one_line_error(["bundle", "unpack", str(packed), "--out", str(out)], "exists and is not empty: choose a new --out")
    assert [p.name for p in out.iterdir()] == ["mine.txt"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert b.unpack(packed, empty) == empty
    assert (empty / "artifacts" / "x.bin").read_bytes() == b"x"


@pytest.mark.slow
def test_show_and_diff_of_a_packed_bundle_leave_no_folder(
    built: b.BuildResult, tmp_path: Path, scratch_tmp: Path
) -> None:
    one = b.pack(built.directory, tmp_path / "one.tar")
    assert runner.invoke(app, ["bundle", "show", str(one)]).exit_code == 0
    assert runner.invoke(app, ["bundle", "diff", str(one), str(one)]).exit_code == 0
    assert list(scratch_tmp.iterdir()) == []


# --- the store ----------------------------------------------------------------------------------------------


def test_state_commands_on_an_uninitialised_store_are_one_line(tmp_path: Path, store: Store, chdb_dir: Path) -> None:
    """An uninitialised embedded store gave chDB's "Unknown table ... inferensics.bundles" traceback, and the
    command created the store folder."""
    data_dir = tmp_path / "empty_dd"
    one_line_error(
        ["bundle", "promote", "abab", "--channel", "x", "--data-dir", str(data_dir)],
        "it is not initialised; create it with `inferensics init`",
    )
    one_line_error(
        ["bundle", "states", "--out", str(tmp_path / "s.json"), "--data-dir", str(data_dir)], "not initialised"
    )
    assert not data_dir.exists()
    assert not (tmp_path / "s.json").exists()
    # A folder that holds the engine's files but no schema (a fresh database in the session's store folder, which
    # the `store` fixture has opened).
    fresh = scratch_dsn(chdb_dir)
    one_line_error(["bundle", "revoke", "abab", "--dsn", fresh], "is not initialised: run `inferensics init`")


def test_state_commands_leave_a_folder_that_is_not_a_store_untouched(tmp_path: Path) -> None:
    """`bundle states --dsn chdb:///<a folder of the user's>` wrote chDB's metadata/ and tmp/ into it."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    for args in (["states", "--out", str(tmp_path / "s.json")], ["promote", "abab", "--channel", "x"]):
        one_line_error(["bundle", *args, "--dsn", f"chdb://{folder}"], "it is a folder of other files, not a store")
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]
    assert not (tmp_path / "s.json").exists()


def test_states_to_a_missing_folder_is_one_line(store: Store, tmp_path: Path) -> None:
    dsn = f"chdb://{store.dsn.path}?database={store.database}"
    one_line_error(
        ["bundle", "states", "--out", str(tmp_path / "nodir9" / "states.json"), "--dsn", dsn],
        f"the folder {tmp_path / 'nodir9'} does not exist",
    )


@pytest.mark.slow
def test_push_with_a_token_that_cannot_confirm_writes_nothing(built: b.BuildResult, tmp_path: Path) -> None:
    """With an ingest-only token push uploaded and recorded the bundle, then failed (rc 2) reading its
    confirmation: "POST /api/v1/sql: 403 token lacks the 'admin' role"."""
    from tests.collector.service.harness import ADMIN, INGEST, new_service

    (tmp_path / "service").mkdir()
    with new_service(tmp_path / "service") as service:
        text = one_line_error(
            ["bundle", "push", str(built.directory), "--service", service.url, "--token", INGEST], "admin role"
        )
        assert "nothing was written" in text
        client = service.client(ADMIN)
        assert client.sql("SELECT count() AS n FROM bundle_states").item() == 0
        assert client.sql("SELECT count() AS n FROM blobs").item() == 0
