"""``inferensics replay``: fetch a failing request's pack through the service, re-execute it in a fresh
process, print the verdict, write the reports and record a ``replay_results`` row."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Final, NamedTuple

import typer

from inferensics.cli.errors import fail
from inferensics.cli.extras import require_extra

CAPTURE_HINT = (
    "a host captures the inputs of requests that raise or give non-finite output, and a rate= sample of the "
    "rest, once capture is on (it is off by default: instrument(..., config=SdkConfig(capture=CaptureRules("
    "enabled=True, rate=0.01))), both from inferensics.collector); this request was none of those"
)
UNSAMPLED_HINT = (
    "its output was not fingerprinted (fp_status unsampled: a host fingerprints one CPU output in 32 unless "
    "SdkConfig(fingerprint_rate=1.0)), so a non-finite output could not be seen to capture it: serve with "
    "SdkConfig(capture=CaptureRules(enabled=True), fingerprint_rate=1.0) to capture such requests"
)
CAPTURE_SETTING = (
    "instrument(..., config=SdkConfig(capture=CaptureRules(enabled=True, rate=0.01))), both from inferensics.collector"
)
KEYRING_ENV: Final = "INFERENSICS_BUNDLE_KEYRING"
"""``inferensics.bundle.keys.KEYRING_ENV``, spelled here so that a replay without a keyring is refused before the
bundle part (which imports torch) loads; tests/replay/test_replay_paths.py pins that the two agree."""
ROLES_NEEDED: Final = (
    "`inferensics replay REQUEST_ID` needs a token with the 'read' role (the request's row) and the 'replay' role "
    "(its captured inputs), 'admin' to fetch a bundle pushed to the service (unless --bundle DIR or "
    "$INFERENSICS_BUNDLES) and 'ingest' to record the verdict (unless --no-record); admin holds them all"
)
"""The roles a replay through the service uses, as its refusals say them (README, step 4)."""
OCCURRENCES_LISTED: Final = 10
"""Requests sharing an id that a refusal lists at most (the earliest ones; ``--occurrence`` reaches them all)."""
ELSEWHERE: Final = "if the request went to another service, pass its URL with --service"
"""What a refusal of a request id the service does not hold (or refused to look up) suggests."""
BUNDLES_ENV = "INFERENSICS_BUNDLES"
"""A folder of bundles (``<bundle_id>/`` or ``<bundle_id>.tar``) replay may take a request's bundle from."""


def register(app: typer.Typer) -> None:
    """Add ``replay`` to the app."""
    app.command("replay")(replay)


def replay(  # noqa: PLR0917 - typer maps each parameter to an option
    request_id: Annotated[str | None, typer.Argument(help="The failing request's id.", show_default=False)] = None,
    pack: Annotated[Path | None, typer.Option("--pack", help="Replay an exported pack folder instead.")] = None,
    service: Annotated[
        str | None,
        typer.Option(
            "--service",
            help="Service URL (default $INFERENSICS_SERVICE_URL). A --pack replay asks no service unless this flag "
            "is given ($INFERENSICS_SERVICE_URL alone does not: a pack runs offline); with it, the pack's inputs "
            "are checked against the digest its store recorded for the request (without it, against the pack's own "
            "copy only, as the output says).",
        ),
    ] = None,
    token: Annotated[str | None, typer.Option("--token", envvar="INFERENSICS_TOKEN", help="Bearer token.")] = None,
    occurrence: Annotated[
        int | None,
        typer.Option(
            "--occurrence",
            metavar="N",
            help="Which of the requests that share REQUEST_ID to replay, 1 for the earliest (a client re-run reuses "
            "its ids; the dashboard's request page numbers them the same way, ?occurrence=N). An id shared by several "
            "requests is refused without it, listing each one's time, host and model.",
            show_default=False,
        ),
    ] = None,
    device: Annotated[str, typer.Option("--device", help="cpu or cuda.")] = "cpu",
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Folder for verdict.json, verdict.md and repro.py; it may hold other files and this request's "
            "earlier report (replaced), never another request's (refused: one folder per request).",
        ),
    ] = None,
    export: Annotated[
        Path | None,
        typer.Option(
            "--export", help="Write the pack into this new (or empty) folder and stop (replay it with --pack)."
        ),
    ] = None,
    bundle: Annotated[
        Path | None, typer.Option("--bundle", help=f"The bundle folder or .tar (default: ${BUNDLES_ENV}/<bundle id>).")
    ] = None,
    keyring: Annotated[
        str | None, typer.Option("--keyring", help="Trusted builders' keys (default $INFERENSICS_BUNDLE_KEYRING).")
    ] = None,
    allow_incompatible: Annotated[
        bool,
        typer.Option(
            "--allow-incompatible",
            help="Recompile from the recorded configuration when the bundle was built for another device.",
        ),
    ] = False,
    what_if: Annotated[
        bool,
        typer.Option(
            "--what-if",
            help="Replay even when it is not of what served the request (--bundle for a request served without one, "
            "or the model's code here differs from the build's); the verdict is printed, never recorded.",
        ),
    ] = False,
    import_path: Annotated[
        list[Path] | None,
        typer.Option(
            "--import-path",
            metavar="DIR",
            help="A folder the bundle's model factory, customisations and --inputs function are imported from, as "
            "`bundle build` imported them (repeatable; the working directory is searched too). Without the --inputs "
            "function the bundle's build history is not replayed, and the verdict says so.",
        ),
    ] = None,
    record: Annotated[
        bool,
        typer.Option(
            "--record/--no-record",
            help="Write a replay_results row through the service (a token with the 'ingest' role). A --pack replay "
            "records only with --service (its request's row is looked up there); without it, it says it recorded "
            "nothing.",
        ),
    ] = True,
) -> None:
    """Re-execute a failing request against its exact bundle, eager and fp64, and name the fault."""
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        fail(f"--device {device!r} is not a device: use cpu or cuda")
    if (request_id is None) == (pack is None):
        fail("give a REQUEST_ID or --pack DIR (one of them)")
    if export is not None and (pack is not None or out is not None):
        fail("--export writes a request's pack and stops: give it a REQUEST_ID, without --pack or --out")
    if occurrence is not None and pack is not None:
        fail("--occurrence picks one of the requests that share a REQUEST_ID: a pack holds one request, so it takes "
             "no --occurrence")  # fmt: skip
    if occurrence is not None and occurrence < 1:
        fail(f"--occurrence {occurrence}: requests that share an id are numbered from 1 (the earliest)")
    # A pack is self-contained: it runs on a host that reaches no service, whatever $INFERENSICS_SERVICE_URL says
    # there. Its inputs are checked against the digest the store recorded for its request when --service asks for
    # it (pack.json is not signed, so its own copy of that digest proves nothing against an editor).
    ask_store = pack is None or bool(service)
    if ask_store:
        require_extra("service", "replay")  # the pack, or its request's row, comes through the service's client
    if pack is not None and (problem := _pack_problem(pack)):
        fail(problem)  # what the user named first: a keyring would not make a missing pack replayable
    keyring_problem = _keyring_problem(keyring) if export is None else ""
    if keyring_problem and request_id is not None and not what_if:
        # A request served without a bundle (or never captured) has no signed code to verify: asking for a keyring
        # first sent on-call round in circles. Its row is looked up (no torch, no bundle part); a service that
        # cannot be asked, or refuses the id or the token, is said; a failure inside the service leaves the keyring
        # refusal as it was.
        unreplayable = _unreplayable_quietly(service, token, request_id, occurrence)
        if unreplayable:
            fail(unreplayable)
    if keyring_problem:
        fail(keyring_problem)
    _check_paths(request_id, out=out, export=export, bundle=bundle, import_paths=import_path or [])
    client = None
    try:
        # The pack holds the request's captured inputs (tenant data): private (0700), and gone after the replay,
        # also when it fails; unpacked bundles go here too, never beside --export.
        with tempfile.TemporaryDirectory(prefix="inferensics-pack-") as scratch:
            origin = None
            recorded: str | None = None  # the store's digest of the request's inputs; None: the store not asked
            replayed: dict[str, Any] = {}  # the store's row of the request replayed (its host and start time)
            if ask_store:
                from inferensics.collector.client import ServiceClient

                client = ServiceClient(service, token)
            if pack is None:
                assert request_id is not None
                assert client is not None
                target = export or Path(scratch) / "pack"
                pack, origin, recorded, replayed = _assemble(
                    client,
                    request_id,
                    target,
                    bundle=bundle,
                    scratch=Path(scratch),
                    source=_source_of(service),
                    occurrence=occurrence,
                    what_if=what_if,
                    exporting=export is not None,
                )
                if export is not None:
                    typer.echo(_exported_line(export, keyring))
                    return
            elif client is not None:
                # The store's row of the pack's request: its inputs are checked against it here, and the verdict
                # is recorded against it (its host and start time), as an online replay's is.
                recorded, replayed = _recorded_inputs(client, pack, source=_source_of(service))
            verdict = _run_fresh(
                pack,
                device=device,
                out=out,
                keyring=keyring,
                allow_incompatible=allow_incompatible,
                origin=origin,
                recorded_inputs=recorded,
                what_if=what_if,
                import_paths=import_path or [],
            )
        from inferensics.replay import Verdict
        from inferensics.replay._internal.report import REPORT_FILES, render_text

        v = Verdict.from_dict(verdict)
        typer.echo(render_text(v))
        if out is not None:  # the executor removed an earlier repro of this request where it wrote none
            written = [out / name for name in REPORT_FILES if (out / name).is_file()]
            typer.echo(f"reports: {', '.join(map(str, written))}")
        if record and client is not None and v.evidence.get("what_if"):
            typer.echo(f"not recorded in replay_results: a what-if replay ({v.evidence['what_if']})")
        elif record and client is not None:
            _record(client, v, token, replayed)
        elif record:
            typer.echo("not recorded in replay_results: a --pack replay without --service asks no service (pass "
                       "--service URL to record it against its request's row)")  # fmt: skip
    finally:
        if client is not None:
            client.close()


def _keyring_problem(keyring: str | None) -> str:
    """Why a replay could not verify its bundle, said before the bundle part or torch is reached (the fresh process
    said so only after its imports, 16 s on a 2-core machine), or ``""``. The words are those of
    ``inferensics.bundle.Keyring.load``, which checks the keys themselves there."""
    chosen = keyring if keyring is not None else os.environ.get(KEYRING_ENV)
    if not chosen:
        return (f"no keyring of trusted builders: pass --keyring (in Python, keyring=) or set ${KEYRING_ENV} to a .pub "
                "file or folder")  # fmt: skip
    if not (ring := Path(chosen)).exists():
        return f"keyring {ring} does not exist: pass a .pub file or a folder of them"
    return ""


PACK_FILE: Final = "pack.json"
"""``inferensics.replay._internal.pack.PACK_FILE``, spelled here so that a --pack that is no pack is refused before
the replay part (which imports torch) loads; tests/replay/test_replay_paths.py pins that the two agree."""


def _pack_problem(pack: Path) -> str:
    """Why ``--pack`` names no pack (``""`` when it holds a ``pack.json``; its files are checked where it is read)."""
    export = "export one with `inferensics replay REQUEST_ID --export DIR`"
    if not pack.exists():
        return f"--pack {pack} does not exist: pass the folder a replay's --export wrote, or {export}"
    if not pack.is_dir():
        return f"--pack {pack} is not a folder: pass the folder a replay's --export wrote, or {export}"
    if not (pack / PACK_FILE).is_file():
        return f"--pack {pack} is not a replay pack (no {PACK_FILE}): {export}"
    return ""


def _unreplayable_quietly(service: str | None, token: str | None, request_id: str, occurrence: int | None) -> str:
    """Why the request cannot be replayed whatever the keyring, from its row: the service cannot be asked
    (unreachable, not the service, the token refused), it holds no such request, it has no captured inputs or was
    served without a bundle; ``""`` when it can be replayed, or when the service failed to read its row (5xx: the
    caller's next refusal stands then)."""
    from inferensics.collector.client import ServiceClient, ServiceError

    try:
        client = ServiceClient(service, token, timeout=10.0)
    except ServiceError as exc:  # its CA file cannot be read
        return exc.message
    try:
        with contextlib.closing(client):
            which = {"occurrence": occurrence} if occurrence is not None else {}
            detail = client.query("request_detail", request_id=request_id, **which)
            if detail.is_empty():
                return _no_request_line(client.url, request_id, _source_of(service))
            row = {k: _plain(v) for k, v in detail.row(0, named=True).items()}
    except ServiceError as exc:
        # The service cannot be asked, or refused the id or the token: said as the lookup after the keyring says it.
        # A failure inside the service (5xx) leaves the keyring refusal.
        failed_inside = exc.status is not None and exc.status >= 500 and client.url not in exc.message
        return "" if failed_inside else _lookup_refusal(client.url, exc, _source_of(service))
    except Exception:  # an answer that is no frame: the keyring refusal is said instead
        return ""
    if int(row.get("occurrences") or 1) > 1 and occurrence is None:
        return ""
    return _uncaptured_line(request_id, row) or _served_without_bundle_line(request_id, row)


def _served_without_bundle_line(request_id: str, row: dict[str, Any]) -> str:
    """The options for a request served without a bundle (``""`` when a bundle served it)."""
    if str(row.get("bundle_id") or ""):
        return ""
    return (
        f"request {request_id} was served without a bundle, so there is no signed code to re-execute; options: "
        "(a) `--bundle DIR --what-if` replays it against a bundle of the same model (a what-if: its verdict is not "
        "recorded); (b) `--export DIR` writes its captured inputs, then run "
        "`inferensics.replay.investigate(model, inferensics.replay.read_pack(DIR).inputs())` with your model in "
        "Python; (c) serve from a bundle (tracker.compile(..., bundle=...)) so that the next occurrence is replayable"
    )


def _uncaptured_line(request_id: str, row: dict[str, Any]) -> str:
    """Why a request has no captured inputs, from its row (``""`` when it has them): its output was not
    fingerprinted, it failed on a host with capture off, or it did not fail and was not sampled."""
    from inferensics.schema import columns as col
    from inferensics.schema.events import FP_UNSAMPLED

    if row.get(col.CAPTURE_BLOB):
        return ""
    nan, inf = int(row.get(col.FP_NAN) or 0), int(row.get(col.FP_INF) or 0)
    error = str(row.get(col.ERROR) or "") if row.get(col.STATUS) == "error" else ""
    failed = [f"raised {error}"] if error else []
    if nan or inf:
        counts = ", ".join(f"{label} {n}" for label, n in (("NaN", nan), ("inf", inf)) if n)
        failed.append(f"gave non-finite output ({counts})")
    if failed:
        host, model = str(row.get(col.HOST) or "?"), str(row.get(col.MODEL) or "")
        siblings = "`inferensics requests --failing" + (f" --model {model}" if model else "") + "`"
        return (
            f"request {request_id} has no captured inputs, although it {' and '.join(failed)}: its host ({host}) "
            "did not capture it, most likely because capture was off there (a host captures the inputs of requests "
            "that raise or give non-finite output, and a rate= sample of the rest, once capture is on: "
            f"{CAPTURE_SETTING}); turn it on and replay the next occurrence; meanwhile {siblings} lists its siblings"
        )
    why = UNSAMPLED_HINT if row.get(col.FP_STATUS) == FP_UNSAMPLED else CAPTURE_HINT
    return f"request {request_id} has no captured inputs; {why}"


def _exported_line(export: Path, keyring: str | None) -> str:
    """What an export wrote and what replaying it needs beside torch and pydantic: the model's factory and inputs
    function and the bundle's customisations, imported by module name where it is replayed."""
    from inferensics.replay import read_pack

    pack = read_pack(export)
    if pack.bundle_dir is None:
        return (
            f"wrote pack {export}: the request was served without a bundle, so the pack holds its captured inputs "
            "only: run `inferensics.replay.investigate(model, inferensics.replay.read_pack"
            f"({str(export)!r}).inputs())` with your model"
        )
    modules = _modules_needed(pack.bundle_dir)
    needs = "torch and pydantic"
    if modules:
        files = ", ".join(f"{m.replace('.', '/')}.py" for m in modules)
        needs += (
            f", and the modules it imports by name: {', '.join(modules)} (copy {files} beside where you replay it, "
            "or put their folder on PYTHONPATH)"
        )
    return f"wrote pack {export}: replay it with `{_pack_command(export, keyring)}` (needs {needs})"


def _modules_needed(bundle_dir: Path) -> list[str]:
    """The modules a bundle's replay imports by name (the model's factory and inputs function, the customisations),
    read from its manifest without verifying it (the replay verifies it); ``inferensics`` ones left out."""
    from inferensics.bundle.manifest import read_manifest_unverified

    try:
        identity = read_manifest_unverified(bundle_dir)[0].identity
    except Exception:  # not a readable manifest: the replay says what is wrong with it
        return []
    targets = [identity.get("model", {}).get("factory", ""), identity.get("model", {}).get("inputs", "")]
    targets += [str(c.get("import_path", "")) for c in identity.get("customisations", [])]
    found = [str(t).partition(":")[0] for t in targets if t and ":" in str(t)]
    return [m for m in dict.fromkeys(found) if m and not m.startswith("inferensics.")]


def _check_paths(
    request_id: str | None, *, out: Path | None, export: Path | None, bundle: Path | None, import_paths: list[Path]
) -> None:
    """Refuse, before anything is fetched or run, a path option the replay would fail on (or destroy) at its end.
    Of a --pack replay, the executor checks --out against the pack's request before it replays."""
    from inferensics.replay._internal.pack import export_problem
    from inferensics.replay._internal.report import out_problem

    if export is not None and (problem := export_problem(export)):
        fail(f"--export {problem}")
    if out is not None and (problem := out_problem(out, request_id)):
        fail(problem)
    if bundle is not None and not bundle.exists():
        fail(f"--bundle {bundle} does not exist: pass the bundle folder or .tar that served the request")
    if bundle is not None and export is not None and export.resolve().is_relative_to(bundle.resolve()):
        fail(f"--export {export} is inside the bundle folder {bundle}: choose an --export folder outside it")
    for folder in import_paths:
        if not folder.is_dir():
            fail(f"--import-path {folder} is not a folder: pass the folder that holds the bundle's modules")


def _source_of(service: str | None) -> str:
    """Where the service URL came from, as the client resolves it (``ServiceClient``)."""
    from inferensics.collector.service_url import SERVICE_URL_ENV

    if service:
        return "given by --service"
    if os.environ.get(SERVICE_URL_ENV):
        return f"from ${SERVICE_URL_ENV}"
    return f"the default: neither --service nor ${SERVICE_URL_ENV} is set"


def _pack_command(pack: Path, keyring: str | None) -> str:
    """The command that replays an exported pack, with the keyring this one was given (the pack's bundle is
    verified again there)."""
    import shlex

    command = f"inferensics replay --pack {shlex.quote(str(pack))}"
    if keyring:
        return f"{command} --keyring {shlex.quote(keyring)}"
    return command if os.environ.get(KEYRING_ENV) else f"{command} --keyring BUILDER.pub"


class _Origin(NamedTuple):
    """Where the pack's bundle came from, as the user knows it: replay's messages name it, not the pack's copy."""

    label: str
    folder: bool
    """``label`` is a folder (its files are named inside it), else an archive or the service's copy."""


def _request_row(
    client: Any, request_id: str, *, source: str, missing: str = "", occurrence: int | None = None
) -> dict[str, Any]:
    """The request's row in the store, through the service (``missing``: what its absence means, and what to do).

    ``occurrence`` picks one of several requests that share the id (1 for the earliest); without it an id shared
    by several is refused in one line listing them (a replay of the earliest, silently, was of the wrong one)."""
    row = _occurrence_row(client, request_id, occurrence, source=source, missing=missing)
    n = int(row.get("occurrences") or 1)
    if n > 1 and occurrence is None:
        fail(_shared_id_line(client, request_id, row, source=source, missing=missing))
    return row


def _occurrence_row(
    client: Any, request_id: str, occurrence: int | None, *, source: str, missing: str = ""
) -> dict[str, Any]:
    """The ``occurrence``-th request of the id (the earliest when ``None``), or one line and exit 2."""
    from inferensics.collector.client import ServiceError

    which = {"occurrence": occurrence} if occurrence is not None else {}
    try:
        detail = client.query("request_detail", request_id=request_id, **which)
    except ServiceError as exc:
        fail(_lookup_refusal(client.url, exc, source, missing))
    if detail.is_empty():
        fail(_no_request_line(client.url, request_id, source, missing))
    return {k: _plain(v) for k, v in detail.row(0, named=True).items()}


def _lookup_refusal(url: str, exc: Any, source: str, missing: str = "") -> str:
    """Why the service at ``url`` did not give the request's row (``exc``, a ``ServiceError``): it cannot be asked,
    it refused the token, or it answered that it holds no such request (``missing``: what that absence means)."""
    asked = f"the service at {url} ({source})"
    if exc.status == 403:
        return f"{asked} refused the token: {exc.detail}; {ROLES_NEEDED}"
    if url in exc.message:  # unreachable, not the service, the token unknown: the client's own words
        return str(exc.message)
    said = exc.detail.removeprefix("request_detail: ")  # the service's words, without its query's name
    return f"{asked} answered: {said}; {f'{missing}; ' if missing else ''}{ELSEWHERE}"


def _no_request_line(url: str, request_id: str, source: str, missing: str = "") -> str:
    """The refusal of a request id the service's store does not hold (``missing``: what its absence means)."""
    return (f"no request {request_id!r} in the store of the service at {url} ({source}): "
            f"{missing or 'check the id'}; {ELSEWHERE}")  # fmt: skip


def _shared_id_line(client: Any, request_id: str, first: dict[str, Any], *, source: str, missing: str) -> str:
    """The refusal of an id several requests share: how many, each one's time, host and model (the earliest
    :data:`OCCURRENCES_LISTED`), and the flag that picks one."""
    from inferensics.schema import columns as col

    n = int(first["occurrences"])
    rows = [first] + [
        _occurrence_row(client, request_id, k, source=source, missing=missing)
        for k in range(2, min(n, OCCURRENCES_LISTED) + 1)
    ]
    listed = "; ".join(
        f"{k}: {r.get(col.TS)} on host {r.get(col.HOST) or '?'} (model {r.get(col.MODEL) or '?'}, "
        f"{r.get(col.STATUS) or '?'}{', inputs captured' if r.get(col.CAPTURE_BLOB) else ''})"
        for k, r in enumerate(rows, start=1)
    )
    more = f"; and {n - len(rows)} more" if n > len(rows) else ""
    return (
        f"request id {request_id!r} names {n} requests in the store of the service at {client.url} (a client re-run "
        f"reuses its ids): {listed}{more}; pick one with --occurrence N (1 is the earliest, numbered as the "
        "dashboard's request page numbers them)"
    )


def _pack_row(client: Any, request_id: str, pack_row: dict[str, Any], *, source: str, missing: str) -> dict[str, Any]:
    """The store's row of the request a pack holds: where several requests share its id, the one with the pack's
    host and start time (the earliest of them was taken, and a pack of another refused as altered)."""
    from inferensics.schema import columns as col

    row = _occurrence_row(client, request_id, None, source=source, missing=missing)
    n = int(row.get("occurrences") or 1)
    key = (str(pack_row.get(col.HOST, "")), str(pack_row.get(col.TS, "")))
    k = 1
    while n > 1 and (str(row.get(col.HOST, "")), str(row.get(col.TS, ""))) != key:
        k += 1
        if k > n:
            fail(f"none of the {n} requests with id {request_id!r} in the store of the service at {client.url} "
                 f"({source}) started on host {key[0] or '?'} at {key[1] or '?'} as the pack's did: "
                 f"{missing}")  # fmt: skip
        row = _occurrence_row(client, request_id, k, source=source, missing=missing)
    return row


def _recorded_inputs(client: Any, pack: Path, *, source: str) -> tuple[str, dict[str, Any]]:
    """The digest the store recorded for the captured inputs of the pack's request (``""`` when its row records
    none), after checking the pack's inputs against it here, before the fresh process starts; and that row."""
    from inferensics.replay import ReplayError, read_pack
    from inferensics.replay._internal.pack import check_inputs
    from inferensics.schema import columns as col

    try:
        opened = read_pack(pack)  # its files' hashes first: an altered pack is refused before the service is asked
    except ReplayError as exc:
        fail(str(exc))
    assert opened.inputs_bytes is not None
    row = _pack_row(
        client,
        opened.request_id,
        opened.meta["request"],
        source=source,
        missing="the pack's inputs cannot be checked against the digest recorded for them (to replay it against "
        "its own pack.json alone, leave out --service)",
    )
    recorded = str(row.get(col.CAPTURE_BLOB) or "")
    in_pack = str(opened.meta["request"].get(col.CAPTURE_BLOB) or "")
    try:  # here, before the fresh process starts; it checks the bytes it reads against the same digest again
        check_inputs(opened.request_id, opened.inputs_bytes, in_pack, recorded)
    except ReplayError as exc:
        fail(str(exc))
    return recorded, row


def _assemble(
    client: Any,
    request_id: str,
    target: Path,
    *,
    bundle: Path | None,
    scratch: Path,
    source: str,
    occurrence: int | None = None,
    what_if: bool = False,
    exporting: bool = False,
) -> tuple[Path, _Origin | None, str, dict[str, Any]]:
    """Build the pack from the service: the request record, its captured inputs, the bundle (none in an export of
    a request served without one); with the digest the store recorded for the inputs, and the request's row."""
    from inferensics.collector.client import ServiceError
    from inferensics.replay import ReplayError, write_pack
    from inferensics.schema import columns as col

    row = _request_row(client, request_id, source=source, occurrence=occurrence)
    if uncaptured := _uncaptured_line(request_id, row):
        fail(uncaptured)
    no_bundle = _served_without_bundle_line(request_id, row)
    if no_bundle and not what_if and not exporting:
        fail(no_bundle)
    try:
        inputs = client.get_blob(row[col.CAPTURE_BLOB])
    except ServiceError as exc:
        if exc.status == 403:  # not "expired": the token lacks the role that reads captured inputs
            fail(f"the captured inputs of {request_id} cannot be fetched: {client.url} refused the token "
                 f"({exc.detail}); {ROLES_NEEDED}")  # fmt: skip
        fail(f"the captured inputs of {request_id} cannot be fetched ({exc.message}): they may have expired")
    bundle_dir: Path | None = None
    origin: _Origin | None = None
    if not (no_bundle and exporting and bundle is None):  # an export of a request served without one: inputs only
        bundle_dir, origin = _bundle_dir(str(row.get("bundle_id", "")), bundle, scratch, client)
    try:
        pack = write_pack(target, request=row, inputs=inputs, bundle_dir=bundle_dir)
    except ReplayError as exc:  # an --export folder inside the bundle from $INFERENSICS_BUNDLES
        fail(str(exc))
    return pack, origin, row[col.CAPTURE_BLOB], row


def _pulled(client: Any, bundle_id: str, scratch: Path) -> Path | None:
    """The bundle as pushed through the service (``inferensics bundle push``), or ``None``."""
    from inferensics import bundle as b
    from inferensics.collector.client import ServiceError

    if not bundle_id or not all(c in "0123456789abcdef" for c in bundle_id):
        return None
    try:
        rows = client.sql(
            "SELECT argMax(attrs['pack_blob'], ts) AS blob FROM bundle_states "
            f"WHERE bundle_id = '{bundle_id}' AND state = 'pushed'"
        )
        sha = str(rows.item(0, 0)) if rows.height else ""
        if not sha:
            return None
        archive = Path(tempfile.mkdtemp(prefix="bundle-", dir=scratch)) / "bundle.tar"
        archive.write_bytes(client.get_blob(sha))
    except ServiceError as exc:
        if exc.status == 403:  # not "not pushed": the token cannot look (the pushed bundles are read through SQL)
            fail(
                f"bundle {bundle_id[:16]} cannot be looked up in {client.url}: the token lacks the 'admin' role that "
                f"reading pushed bundles needs ({exc.detail}); use a token with admin, pass --bundle DIR or set "
                f"${BUNDLES_ENV}"
            )
        return None
    try:
        return b.unpack(archive, archive.parent / "bundle")
    except b.BundleError as exc:
        fail(str(exc))


def _bundle_dir(bundle_id: str, given: Path | None, scratch: Path, client: Any) -> tuple[Path, _Origin]:
    from inferensics import bundle as b

    candidates = [given] if given is not None else []
    root = os.environ.get(BUNDLES_ENV)
    if given is None and root and bundle_id:
        candidates += [Path(root) / bundle_id, Path(root) / f"{bundle_id}.tar"]
    for c in candidates:
        if c.is_dir():
            return c, _Origin(str(c), folder=True)
        if c.is_file():
            try:
                return b.unpack(c, Path(tempfile.mkdtemp(prefix="bundle-", dir=scratch))), _Origin(str(c), folder=False)
            except b.BundleError as exc:
                fail(str(exc))
    if given is None:
        pulled = _pulled(client, bundle_id, scratch)
        if pulled is not None:
            return pulled, _Origin(f"bundle {bundle_id[:16]} as pushed to {client.url}", folder=False)
    if not bundle_id:
        fail(
            "the request was served without a bundle: a --what-if replay needs a bundle of the same model; pass "
            "--bundle DIR"
        )
    if root:
        there = "" if Path(root).is_dir() else ", which is not a folder"
        fail(
            f"bundle {bundle_id[:16]} is not in ${BUNDLES_ENV} ({root}{there}: no {bundle_id}/ or {bundle_id}.tar) "
            "and was not pushed to the service: put it there, push it (`inferensics bundle push`) or pass --bundle DIR"
        )
    fail(
        f"bundle {bundle_id[:16]} is not available here (not pushed to the service): "
        f"pass --bundle DIR or set ${BUNDLES_ENV}"
    )


def _run_fresh(
    pack: Path,
    *,
    device: str,
    out: Path | None,
    keyring: str | None,
    allow_incompatible: bool,
    origin: _Origin | None,
    recorded_inputs: str | None = None,
    what_if: bool = False,
    import_paths: list[Path] | None = None,
) -> dict[str, Any]:
    """Run the executor in a fresh interpreter and return the verdict dict (``origin``: where the bundle of a
    pack assembled here came from; its refusals name that, not the temporary copy; ``recorded_inputs``: the
    digest the store recorded for the request's captured inputs, ``None`` when the store was not asked;
    ``import_paths``: folders the bundle's modules are imported from, before the working directory)."""
    # -P: nothing in the working directory shadows an installed module in the executor (see demo/processes.py);
    # the directory is still searched after them, as `bundle build` searched it, for the model's factory.
    cmd = [sys.executable, "-P", "-m", "inferensics.replay", "--pack", str(pack), "--device", device, "--json"]
    for folder in [*(import_paths or []), Path.cwd()]:
        cmd += ["--import-path", str(folder.absolute())]
    if out is not None:
        cmd += ["--out", str(out)]
    if keyring is not None:
        cmd += ["--keyring", keyring]
    if allow_incompatible:
        cmd.append("--allow-incompatible")
    if what_if:
        cmd.append("--what-if")
    if recorded_inputs is not None:
        cmd += ["--recorded-inputs", recorded_inputs]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        line = next((ln for ln in reversed(proc.stderr.splitlines()) if ln.startswith("error: ")), "")
        said = (
            line.removeprefix("error: ")
            if line
            else f"replay failed: {(proc.stderr.strip().splitlines() or ['no output'])[-1]}"
        )
        fail(_as_the_user_named(said, pack, origin) if origin is not None else said)
    result = verdict_of(proc.stdout)
    if result is None:
        last = (proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines() or ["no output"])[-1]
        fail(
            f"replay printed no verdict (its last line: {last[:300]}); "
            f"`{sys.executable} -m inferensics.replay --pack {pack}` shows all it prints"
        )
    return result


def _as_the_user_named(line: str, pack: Path, origin: _Origin) -> str:
    """``line`` with the temporary pack's copy of the bundle named as the user knows the bundle."""
    from inferensics.replay._internal.pack import BUNDLE_DIR

    for copy in dict.fromkeys((str(pack / BUNDLE_DIR), str((pack / BUNDLE_DIR).resolve()))):
        if not origin.folder:
            line = line.replace(f"{copy}/manifest.json", origin.label)
        line = line.replace(copy, origin.label)
    return line


def verdict_of(stdout: str) -> dict[str, Any] | None:
    """The verdict the executor printed as its JSON line: the last line that is a JSON object, so that output
    after it (a model module printing at exit, a compiler's native output on the same descriptor) is skipped."""
    for line in reversed(stdout.splitlines()):
        if line.startswith("{"):
            try:
                found = json.loads(line)
            except ValueError:
                continue
            if isinstance(found, dict) and "category" in found:
                return found
    return None


def _record(client: Any, verdict: Any, token: str | None, request: dict[str, Any]) -> None:
    """One replay_results row through the service's OTLP endpoint (a refusal is one line on stderr); ``request`` is
    the store's row of the request replayed, whose host and start time tell it apart from others of its id."""
    import socket

    from inferensics.cli.service_records import record_through_service
    from inferensics.schema import columns as col
    from inferensics.schema.events import NO_TS, ReplayResultEvent

    ev = verdict.evidence
    ratios = [float(r["ratio"]) for r in ev.get("rungs", []) if isinstance(r.get("ratio"), int | float)]
    row = ReplayResultEvent(
        ts=datetime.now(UTC),
        replay_id=uuid.uuid4().hex,
        request_id=str(ev.get("request_id", "")),
        bundle_id=str(ev.get("bundle_id", "")),
        host=socket.gethostname(),
        device_name=str(ev.get("device", "")),
        reproduced=verdict.category not in ("none",),
        attribution=verdict.category,
        error_ratio=max(ratios) if ratios else 0.0,
        detail=verdict.culprit,
        op=verdict.op,
        fx_node=verdict.fx_node,
        kernel=verdict.kernel,
        source_file=verdict.source_file,
        source_line=verdict.source_line,
        source_text=verdict.source_text,
        verdict_json=verdict.to_json(),
        request_host=str(request.get(col.HOST) or ""),
        request_ts=_started(request.get(col.TS)) or NO_TS,
    )
    ok, line = record_through_service(client.url, token, [row], "replay_results")
    if not ok:  # the verdict above stands; the request's page will not show it
        fail(
            f"the verdict above was not recorded in replay_results ({line}): recording needs a token with the "
            "'ingest' role (or admin); pass --no-record to replay without recording"
        )
    typer.echo(f"replay {row.replay_id} {line}")


def _started(value: Any) -> datetime | None:
    """A request row's start time (an ISO-8601 text after :func:`_plain`) as an aware UTC datetime; None without."""
    if isinstance(value, str) and value:
        value = datetime.fromisoformat(value)
    if not isinstance(value, datetime):
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
