"""``inferensics bundle ...``: keys, build, verify, show, diff, pack, push/pull, and release states.

Build, verify, show and diff run on the bundle part alone (torch, triton, pydantic, cryptography). Push,
pull, promote, revoke, quarantine, release and states talk to the store: through a running service
(``--service``: blobs through its blob API, state changes as OTLP records, reads through its SQL API) or
a store DSN (``--dsn``). Every refusal and bad input is one line on stderr and a non-zero exit.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from inferensics.cli.console import console, err_console
from inferensics.cli.errors import fail
from inferensics.cli.extras import needs_extra, require_extra
from inferensics.cli.help_format import command_app
from inferensics.cli.options import DataDirOption, DsnOption, dsn_from
from inferensics.cli.query_runner import service_line, undecodable
from inferensics.cli.service_commands import ServiceOption, TokenOption

if TYPE_CHECKING:
    from inferensics.schema.store import Store

bundle_app = command_app("Release bundles: build, sign, verify, compare and release.")

KeyringOption = Annotated[
    Path | None,
    typer.Option("--keyring", help="Trusted builders' public keys: a .pub file or a folder of them "
                 "(or $INFERENSICS_BUNDLE_KEYRING).", show_default=False),
]  # fmt: skip
StatesOption = Annotated[
    Path | None,
    typer.Option("--states", help="Revoked/quarantined list (from `bundle states`; or $INFERENSICS_BUNDLE_STATES).",
                 show_default=False),
]  # fmt: skip


@contextlib.contextmanager
def _errors() -> Iterator[None]:
    """Bundle errors, store and service errors as one line."""
    from inferensics.bundle import BundleError

    try:
        yield
    except BundleError as exc:
        fail(f"{exc} [{exc.cause}]")


def _manifest_of(path: Path) -> Any:
    """A bundle directory's or packed file's manifest (unverified)."""
    from inferensics import bundle as b

    if path.is_file():
        with tempfile.TemporaryDirectory(prefix="inferensics-bundle-") as tmp:
            return b.read_manifest(b.unpack(path, Path(tmp) / "bundle"))
    return b.read_manifest(path)


def _import_from_working_directory() -> None:
    """Let ``module:function`` names resolve from the working directory too, as under ``python -m``: a console
    script's import path does not hold it, so a model file or a customisation beside the user was "cannot
    import" (a bundle built there then failed to verify there)."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())


def _pairs(values: list[str], what: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for v in values:
        key, sep, raw = v.partition("=")
        if not sep or not key:
            fail(f"{what} {v!r}: expected KEY=VALUE")
        try:
            out[key] = json.loads(raw)
        except ValueError:
            out[key] = raw
    return out


@bundle_app.command()
def keygen(
    out: Annotated[Path, typer.Option("--out", help="Private key path; the public key goes to OUT.pub.")],
) -> None:
    """Make a builder's ed25519 key pair (the .pub goes into the hosts' keyring)."""
    from inferensics import bundle as b

    with _errors():
        priv, pub, keyid = b.generate_key(out)
    console.print(f"private key {priv} (keep secret)\npublic key  {pub} (add to the hosts' keyring)\nkey id {keyid}")


MAX_TRAFFIC_SHAPES = 64
"""``--shapes-from-service`` takes at most this many of the most common shapes (the rest is counted)."""


@dataclass(frozen=True)
class _Traffic:
    """The shapes ``--shapes-from-service`` read, and how to name the requests each came from."""

    service: str
    token: str | None
    where: str
    """The requests' filter (model, window, a shape)."""
    labels: dict[tuple[int, ...], str]
    """Each kept shape's label as the requests carry it (``2x8``)."""
    weights: dict[tuple[int, ...], float]
    """Each kept shape's request count."""

    def distribution(self, leave_out: frozenset[tuple[int, ...]] = frozenset()) -> Any:
        from inferensics import bundle as b

        kept = [(d, n) for d, n in self.weights.items() if d not in leave_out]
        return b.ShapeDistribution.of([list(d) for d, _ in kept], [n for _, n in kept])

    def requests_of(self, shape: tuple[int, ...], shown: int = 3) -> str:
        """``N requests: id, id, id …`` that succeeded with ``shape`` (the newest first)."""
        from inferensics.collector.client import ServiceClient, ServiceError

        where = f"{self.where} AND shape = '{_sql_text(self.labels[shape])}' AND status != 'error'"
        try:
            with ServiceClient(self.service, token=self.token, url_source="--shapes-from-service") as client:
                ids = client.sql(f"SELECT request_id FROM requests WHERE {where} ORDER BY ts DESC LIMIT {shown}")
        except ServiceError as exc:
            return f"its requests could not be read: {service_line(exc)}"
        n = int(self.weights[shape])
        more = " …" if n > ids.height else ""
        return f"from {n} request{'s' if n != 1 else ''}: {', '.join(str(r[0]) for r in ids.iter_rows())}{more}"


def _shapes_from_service(service: str, token: str | None, model: str, since: str) -> _Traffic:
    require_extra("service", "bundle build --shapes-from-service")
    from inferensics.collector.client import ServiceClient, ServiceError

    units = {"d": 86400, "h": 3600, "m": 60}
    if not since or since[-1] not in units or not since[:-1].isdigit():
        fail(f"--since {since!r}: expected a number and d, h or m (7d)")
    try:
        start = datetime.now(UTC) - timedelta(seconds=int(since[:-1]) * units[since[-1]])
    except OverflowError:  # it was a traceback
        fail(f"--since {since!r} reaches back past year 1: give a window such as 7d or 30d")
    window = "model = '{m}' AND ts >= toDateTime64('{t}', 6, 'UTC')".format(
        m=_sql_text(model), t=start.strftime("%Y-%m-%d %H:%M:%S")
    )
    where = f"{window} AND shape != ''"
    # A shape seen only on requests that raised is no shape the model serves: often the very input that made
    # them fail. Building on it failed the whole build ("cannot run shape ... not even eagerly").
    per_shape = (
        f"SELECT shape, count() AS n, countIf(status != 'error') AS ok FROM requests WHERE {where} GROUP BY shape"
    )
    try:
        with ServiceClient(service, token=token, url_source="--shapes-from-service") as client:
            frame = client.sql(
                f"SELECT shape, n FROM ({per_shape}) WHERE ok > 0 ORDER BY n DESC, shape LIMIT {MAX_TRAFFIC_SHAPES}"
            )
            totals = client.sql(
                f"SELECT sumIf(n, ok > 0) AS served, countIf(ok = 0) AS failed, sumIf(n, ok = 0) AS failed_n "
                f"FROM ({per_shape})"
            )
            failed_only = client.sql(f"SELECT shape, n FROM ({per_shape}) WHERE ok = 0 ORDER BY n DESC, shape LIMIT 5")
            unshaped = client.sql(f"SELECT count() FROM requests WHERE {window} AND shape = ''")
    except ServiceError as exc:
        fail(service_line(exc))
    in_window, failed, failed_n = (int(v or 0) for v in totals.row(0)) if totals.height else (0, 0, 0)
    # What the one line below says was left out, each counted and named (shapes left out on purpose).
    left_out: list[str] = []
    if failed:
        shown = ", ".join(f"{shape} ({_requests(n)})" for shape, n in failed_only.iter_rows())
        left_out.append(f"{failed} shape{'s' if failed != 1 else ''} seen only on failed requests (raised; "
                        f"{_requests(failed_n)}): {shown}{' …' if failed > failed_only.height else ''}")  # fmt: skip
    in_top = int(sum(n for _, n in frame.iter_rows()))
    if in_window > in_top:
        left_out.append(f"{_requests(in_window - in_top)} of shapes rarer than the {MAX_TRAFFIC_SHAPES} most common")
    no_shape = int(unshaped.item(0, 0) or 0) if unshaped.height else 0
    if no_shape:
        left_out.append(f"{_requests(no_shape)} that recorded no shape")
    parsed: list[tuple[str, tuple[int, ...], float]] = []
    for shape, n in frame.iter_rows():
        dims = str(shape).split("x")
        ok = all(d.isdigit() and int(d) > 0 for d in dims)
        parsed.append((str(shape), tuple(int(d) for d in dims) if ok else (), float(n)))
    by_rank: dict[int, float] = {}
    for _, dims_, n in parsed:
        if dims_:
            by_rank[len(dims_)] = by_rank.get(len(dims_), 0.0) + n
    rank = max(by_rank, key=lambda r: by_rank[r]) if by_rank else 0
    kept = [(label, dims_, n) for label, dims_, n in parsed if dims_ and len(dims_) == rank]
    skipped = [(label, n) for label, dims_, n in parsed if not dims_ or len(dims_) != rank]
    if skipped:  # counted and named: traffic the bundle will not be qualified on
        total = int(sum(n for _, n in skipped))
        shown = ", ".join(label for label, _ in skipped[:5]) + (" …" if len(skipped) > 5 else "")
        left_out.append(f"{_requests(total)} whose shape is not {rank} positive sizes (AxB...): {shown}")
    if not kept:
        only_failed = " but on failed requests" if failed else ""
        said = f" (left out: {'; '.join(left_out)})" if left_out else ""
        fail(f"the service has no request shapes for model {model!r} since {since}{only_failed}{said}: pass --shapes "
             "FILE")  # fmt: skip
    labels: dict[tuple[int, ...], str] = {}
    weights: dict[tuple[int, ...], float] = {}
    for label, dims_, n in kept:  # "02x8" and "2x8" are one shape
        labels.setdefault(dims_, label)
        weights[dims_] = weights.get(dims_, 0.0) + n
    read = in_window + failed_n + no_shape
    console.print(
        f"traffic shapes from {service}: {_requests(read)} of model {model!r} since "
        f"{start.strftime('%Y-%m-%d %H:%M')} UTC (--since {since}); kept {len(weights)} "
        f"shape{'s' if len(weights) != 1 else ''} of {_requests(int(sum(weights.values())))}, weighted by request "
        f"count; left out: {'; '.join(left_out) or 'none'}",
        markup=False,
    )
    return _Traffic(service, token, where, labels, weights)


def _requests(n: int) -> str:
    return f"{n} request{'s' if n != 1 else ''}"


def _unrunnable_left_out(spec: Any, traffic: _Traffic, skip: bool) -> Any:
    """``spec`` without the traffic shapes its model cannot run eagerly when ``skip`` (each listed), else one line
    naming them, their errors and the requests they came from: checked before the compile, which takes minutes
    and then failed on the first such shape."""
    from dataclasses import replace

    from inferensics.bundle.build import LeftOutShape, unrunnable_shapes

    with _errors():
        bad = unrunnable_shapes(spec)
    if not bad:
        return spec
    left_out = [LeftOutShape(s, why, traffic.requests_of(s)) for s, why in bad]
    named = [f"{traffic.labels[o.shape]} ({o.reason}; {o.requests})" for o in left_out]
    if not skip:
        fail(
            f"{len(bad)} traffic shape{'s' if len(bad) != 1 else ''} the model cannot run eagerly (checked before "
            f"compiling): {'; '.join(named)}: pass --skip-unrunnable-shapes to leave such shapes out, or fix the "
            "model or the inputs function"
        )
    for line in named:
        console.print(f"left out traffic shape {line}", markup=False)
    if len(bad) == len(spec.shapes.shapes):
        fail("no traffic shape runs eagerly with this model and inputs: fix the model or the inputs function")
    # recorded in the signed report too: what the bundle was not qualified on, and why
    return replace(spec, shapes=traffic.distribution(frozenset(s for s, _ in bad)), left_out_shapes=tuple(left_out))


@bundle_app.command()
def build(  # noqa: PLR0917 - one option each
    model: Annotated[str, typer.Option("--model", help="Factory module:function returning the model.")],
    key: Annotated[Path, typer.Option("--key", help="Builder's private key (from `bundle keygen`).")],
    out: Annotated[Path, typer.Option("--out", help="Bundle directory to create.")],
    shapes: Annotated[Path | None, typer.Option("--shapes", help="Shape distribution JSON.")] = None,
    shapes_from_service: Annotated[str | None, typer.Option("--shapes-from-service",
                                   help="Service URL: take the shapes real traffic had.")] = None,
    traffic_model: Annotated[str | None, typer.Option("--traffic-model",
                             help="Model name in the store (with --shapes-from-service).")] = None,
    since: Annotated[str, typer.Option("--since", help="Traffic window (with --shapes-from-service).")] = "7d",
    token: TokenOption = None,
    model_arg: Annotated[list[str] | None, typer.Option("--model-arg", help="Factory argument KEY=VALUE.")] = None,
    inputs: Annotated[str | None, typer.Option("--inputs", help="module:function(shape) -> inputs.")] = None,
    device: Annotated[str, typer.Option("--device", help="cpu or cuda.")] = "cpu",
    name: Annotated[str, typer.Option("--name", help="Human label of the bundle.")] = "bundle",
    mode: Annotated[str | None, typer.Option("--mode", help="torch.compile mode.")] = None,
    option: Annotated[
        list[str] | None,
        typer.Option(
            "--option",
            help="Inductor option KEY=VALUE. Provenance tracking is on unless given "
            "(trace.provenance_tracking_level=1: the request page maps the bundle's kernels to source lines; "
            "=0 turns it off).",
        ),
    ] = None,
    dynamic: Annotated[bool, typer.Option("--dynamic/--static", help="torch.compile dynamic shapes.")] = False,
    fullgraph: Annotated[bool, typer.Option("--fullgraph", help="torch.compile fullgraph.")] = False,
    decomposition: Annotated[list[str] | None, typer.Option("--decomposition",
                             help="Custom decomposition OP=module:function (aten.silu.default=pkg.mod:fn).")] = None,
    fx_pass: Annotated[list[str] | None, typer.Option("--fx-pass", metavar="[SLOT=]module:name",
                       help="Custom FX pass: a module-level CustomGraphPass instance (it needs a uuid()), in "
                            "Inductor's SLOT (default post_grad_custom_post_pass); repeat for other slots.")] = None,
    advise: Annotated[bool, typer.Option("--advise/--no-advise", help="Compare shape policies in the report.")] = True,
    aoti_package: Annotated[Path | None, typer.Option("--aoti-package", help="An AOTInductor .pt2 to carry.")] = None,
    cache: Annotated[Path | None, typer.Option("--cache",
                     help="Bundle cache: copy the verified bundle of an unchanged build from here, else build and "
                          "store it.")] = None,
    rebuild: Annotated[bool, typer.Option("--rebuild", help="With --cache: build anew and replace the cached bundle.")
                       ] = False,
    kernel_evidence: Annotated[Path | None, typer.Option("--kernel-evidence", metavar="FILE",
                               help="Evidence `inferensics kernels qualify --out FILE` wrote on this device: the "
                                    "build compiles with its kernel priorities and carries it, and hosts that load "
                                    "the bundle follow it (evidence measured in Triton's interpreter: only hosts "
                                    "that run it).")] = None,
    allow_inaccurate: Annotated[bool, typer.Option("--allow-inaccurate",
                                help="Sign even when a shape's compiled output is outside tolerance against eager "
                                     "and fp64 (refused by default; the report records it).")] = False,
    skip_unrunnable_shapes: Annotated[bool, typer.Option("--skip-unrunnable-shapes",
                                      help="With --shapes-from-service: leave out (and list) traffic shapes the "
                                           "model cannot run eagerly, instead of refusing the build.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress lines on stderr (each stage of the build, "
                     "with its time).")] = False,
) -> None:  # fmt: skip
    """Compile against a shape distribution, qualify, collect the artifacts, write and sign the manifest."""
    from inferensics import bundle as b
    from inferensics.bundle.build import resolve
    from inferensics.bundle.progress import silent

    if (shapes is None) == (shapes_from_service is None):
        fail("pass exactly one of --shapes FILE and --shapes-from-service URL")
    if device not in {"cpu", "cuda"}:
        fail(f"--device {device!r}: expected cpu or cuda")
    if rebuild and cache is None:
        fail("--rebuild replaces a cached bundle: pass --cache DIR with it")
    if skip_unrunnable_shapes and shapes_from_service is None:
        fail("--skip-unrunnable-shapes leaves out traffic shapes: it goes with --shapes-from-service (take such a "
             "shape out of the --shapes file instead)")  # fmt: skip
    _import_from_working_directory()
    traffic: _Traffic | None = None
    with _errors():
        signing = b.load_signing_key(key)
        if shapes is not None:
            dist = b.ShapeDistribution.load(shapes)
        else:
            if not traffic_model:
                fail("--shapes-from-service needs --traffic-model NAME (the model's name in the store)")
            traffic = _shapes_from_service(str(shapes_from_service), token, traffic_model, since)
            dist = traffic.distribution()
        customs = []
        for d in decomposition or []:
            op, sep, target = d.partition("=")
            if not sep or ":" not in target:
                fail(f"--decomposition {d!r}: expected OP=module:function (aten.gelu.default=mypkg.decomps:fast_gelu)")
            customs.append(b.describe_customisation("decomposition", op, resolve(target, "--decomposition")))
        customs += [_fx_pass(f) for f in fx_pass or []]
        options = {**b.PROVENANCE_OPTIONS, **_pairs(option or [], "--option")}
        spec = b.BuildSpec(
            model=model, shapes=dist, model_args=_pairs(model_arg or [], "--model-arg"), inputs=inputs,
            device=device, mode=mode, options=options, dynamic=dynamic,
            fullgraph=fullgraph, customisations=tuple(customs), name=name, advise=advise, aoti_package=aoti_package,
            allow_inaccurate=allow_inaccurate, kernel_evidence=kernel_evidence,
        )  # fmt: skip
        if traffic is not None:
            spec = _unrunnable_left_out(spec, traffic, skip_unrunnable_shapes)
        progress = silent if quiet else _progress_printer()
        if cache is None:
            result: b.BuildResult | b.CachedBuild = b.build(spec, signing, out, progress=progress)
        else:
            result = b.BundleCache(cache).build(spec, signing, out, rebuild=rebuild, progress=progress)
    if isinstance(result, b.CachedBuild) and result.rejected:
        console.print(f"not reusing the cached bundle: {result.rejected}")
    if isinstance(result, b.CachedBuild) and result.not_stored:
        console.print(f"warning: {result.not_stored}")
    if isinstance(result, b.CachedBuild) and result.reused:
        console.print(f"reused bundle {result.bundle_id} from {cache} (verified; build key {result.key.digest[:16]})")
        console.print(f"copied to {result.directory}\nsigned by {signing.keyid}")
    else:
        console.print(f"built {result.directory}\nbundle id {result.bundle_id}\nsigned by {signing.keyid}")
    console.print(f"report {result.directory / 'report' / 'qualification.html'}")
    if kernel_evidence is not None:  # the bundle's copy: the checked bytes, as hosts will read them
        from inferensics.bundle.build import KERNEL_EVIDENCE
        from inferensics.bundle.load import kernel_evidence_carried_line
        from inferensics.kernels.evidence import parse_evidence

        carried = parse_evidence((result.directory / KERNEL_EVIDENCE).read_bytes(), KERNEL_EVIDENCE)
        console.print(kernel_evidence_carried_line(carried, str(kernel_evidence)), markup=False)
    for line in [*_accuracy_warnings(result.directory), *_value_guard_warnings(result.directory)]:
        console.print(line, markup=False)


def _fx_pass(value: str) -> Any:
    """The customisation ``--fx-pass [SLOT=]module:name`` names, checked as ``describe_customisation`` checks it.

    Raises:
        BundleError: ``bad_input`` for an unknown slot, a name that does not import, or a pass without a uuid().
    """
    from inferensics import bundle as b
    from inferensics.bundle.build import resolve
    from inferensics.bundle.customisations import DEFAULT_FX_PASS_SLOT, refuse_unknown_slot

    slot, sep, target = value.partition("=")
    if not sep:
        slot, target = DEFAULT_FX_PASS_SLOT, value
    if not slot or ":" not in target:
        fail(f"--fx-pass {value!r}: expected [SLOT=]module:name (post_grad_custom_post_pass=mypkg.passes:my_pass)")
    refuse_unknown_slot(slot)  # before importing the user's module
    return b.describe_customisation("fx_pass", slot, resolve(target, "--fx-pass"))


def _progress_printer() -> Callable[[str], None]:
    """A build's progress lines on stderr, each after the seconds since the build started (stdout keeps the
    result, for scripts)."""
    start = time.perf_counter()

    def say(line: str) -> None:
        err_console.print(f"[{time.perf_counter() - start:6.1f} s] {line}", markup=False)

    return say


def _accuracy_warnings(directory: Path) -> list[str]:
    """What the bundle's report says of accuracy that its user must see: shapes signed outside tolerance
    (``--allow-inaccurate``) and shapes the build could not check."""
    try:
        acc = json.loads((directory / "report" / "qualification.json").read_text()).get("accuracy") or {}
    except (OSError, ValueError):
        return []
    lines = []
    if acc.get("failed"):
        shapes = ", ".join("x".join(map(str, s)) for s in acc["failed"])
        lines.append(f"warning: signed with compiled output outside tolerance at {shapes} (--allow-inaccurate; "
                     f"worst error ratio {float(acc['worst_ratio']):.3g}, limit {acc['ratio_limit']:g})")  # fmt: skip
    if acc.get("eager_wrong"):
        shapes = ", ".join("x".join(map(str, s)) for s in acc["eager_wrong"])
        lines.append(f"warning: eager itself is far from fp64 at {shapes}: the model's own ops or a kernel provider "
                     "(the compiled code follows them; see the report)")  # fmt: skip
    for u in acc.get("unchecked", []):
        lines.append(f"warning: accuracy of shape {'x'.join(map(str, u['shape']))} not checked: {u['why']}")
    return lines


def _value_guard_warnings(directory: Path) -> list[str]:
    """The report's value guards, one warning each: graphs that recompile on hosts for a value qualification did
    not serve (it serves one input per shape)."""
    from inferensics.bundle.report import value_guard_lines

    try:
        q = json.loads((directory / "report" / "qualification.json").read_text())
    except (OSError, ValueError):
        return []
    return [f"warning: {line[0].lower()}{line[1:].removesuffix('.')}" for line in value_guard_lines(q)]


@bundle_app.command()
def verify(
    bundle: Annotated[Path, typer.Argument(help="Bundle directory.")],
    keyring: KeyringOption = None,
    states: StatesOption = None,
    device: Annotated[str | None, typer.Option("--device", help="Check against this device (cpu, cuda).")] = None,
) -> None:
    """Check signature, trusted builder, file hashes, state and compatibility (loads nothing)."""
    from inferensics import bundle as b
    from inferensics.bundle.load import kernel_evidence_line, kernel_evidence_of

    _import_from_working_directory()  # the customisations it records, as `bundle build` imported them there
    with _errors():
        v = b.verify(bundle, b.Keyring.load(keyring), states=b.BundleStates.load(states), device=device)
        evidence = kernel_evidence_of(v)  # a load refuses a bundle whose evidence is damaged: so does verify
    console.print(f"verified {v.manifest.name} {v.bundle_id}: signed by {v.builder_keyid[:16]}, "
                  f"{len(v.manifest.resources)} files match, compatible with this host")  # fmt: skip
    for line in [*_accuracy_warnings(v.directory), *_value_guard_warnings(v.directory)]:  # signed, checked above
        console.print(line, markup=False)
    for line in _left_out_of(v.directory):
        console.print(line, markup=False)
    console.print(f"qualified: {_qualified_of(v.manifest)}", markup=False)
    for c in v.manifest.identity.get("customisations", []):
        console.print(f"customisation: {_customisation_line(c)}", markup=False)
    console.print(kernel_evidence_line(v.manifest, evidence, device), markup=False)


def _qualified_of(manifest: Any) -> str:
    """The shapes the bundle qualified: its input shapes, then its dynamic graphs' sizes (what a host compares)."""
    from inferensics.bundle.shapes import qualified_text

    sizes = dict.fromkeys(s for g in manifest.graphs for s in g.qualified_shapes)
    return qualified_text(manifest.accepted_shapes, sizes)


def _customisation_line(c: dict[str, Any]) -> str:
    """What a recorded customisation is and what it replaces in the compiler."""
    path, target = c.get("import_path", "?"), c.get("target", "?")
    what = {
        "decomposition": f"{path} replaces Inductor's decomposition of {target}",
        "fx_pass": f"{path} runs as Inductor's {target}",
        "custom_op": f"{path} registers the custom op {target}",
    }.get(str(c.get("kind")), f"{path} ({c.get('kind')} of {target})")
    return f"{what} (code {str(c.get('code_digest', ''))[:12]})"


@bundle_app.command()
def show(
    bundle: Annotated[Path, typer.Argument(help="Bundle directory or packed file.")],
    as_json: Annotated[bool, typer.Option("--json", help="The whole statement predicate as JSON.")] = False,
) -> None:
    """Print a bundle's manifest: identity factors, customisations (and what each replaces), accuracy, graphs,
    files and build record (not verified: `bundle verify` checks it)."""
    with _errors():
        m = _manifest_of(bundle)
    if as_json:
        console.print_json(json.dumps(m.statement()))
        return
    console.print(f"[bold]{escape(m.name)}[/] {m.bundle_id}", markup=True)
    for k, v in m.build.items():
        console.print(f"  build.{k}: {v}")
    for group in ("model", "weights", "code", "compiler_versions", "settings", "compatibility", "kernel_registry"):
        console.print(f"  {group}:")
        for line in _factor_lines(group, m.identity.get(group)):
            console.print(f"    {line}")
    customs = m.identity.get("customisations", [])
    console.print("  customisations:" + ("" if customs else " (none)"))
    for c in customs:
        console.print(f"    {_customisation_line(c)}", markup=False)
    console.print(f"  qualified: {_qualified_of(m)}", markup=False)
    console.print(f"  {_accuracy_of(bundle)}", markup=False)
    for line in _left_out_of(bundle):
        console.print(f"  {line}", markup=False)
    console.print(f"  {_kernel_evidence_of(bundle, m)}", markup=False)
    from inferensics.schema.shape_text import graph_sizes_text

    for g in m.graphs:
        traced = f" traced from {g.code_location}" if g.code_location else ""
        sizes = f" qualified at graph sizes {graph_sizes_text(g.qualified_shapes)}" if g.qualified_shapes else ""
        console.print(f"  graph {g.fx_key[:16]} code {g.output_code_sha256[:12]}{traced}{sizes} inputs {g.inputs}",
                      markup=False)  # fmt: skip
    console.print(f"  {len(m.resources)} files, {sum(r.size for r in m.resources):,} bytes")


def _bundle_file(bundle: Path, name: str) -> bytes:
    """One file of a bundle directory or packed file.

    Raises:
        OSError, KeyError, tarfile.TarError: it is not there or cannot be read.
    """
    import tarfile

    if bundle.is_dir():
        return (bundle / name).read_bytes()
    with tarfile.open(bundle, "r") as tar:
        member = tar.extractfile(name)
        return member.read() if member is not None else b""


def _accuracy_of(bundle: Path) -> str:
    """The accuracy sentence of a bundle's qualification report (a directory or a packed file): a bundle signed
    outside tolerance (``--allow-inaccurate``) says so with its shapes and error ratios."""
    import tarfile

    from inferensics.bundle.report import accuracy_line

    name = "report/qualification.json"
    try:
        lines = accuracy_line(json.loads(_bundle_file(bundle, name)))
    except (OSError, KeyError, ValueError, tarfile.TarError):
        return f"accuracy: no readable {name} in the bundle"
    if not lines:
        return "accuracy: not recorded (built before qualification checked accuracy)"
    return "accuracy: " + lines[0].removeprefix("Accuracy: ")


def _left_out_of(bundle: Path) -> list[str]:
    """The traffic shapes a bundle's qualification report (a directory or a packed file) records as left out of
    qualification (``--skip-unrunnable-shapes``), one line each."""
    import tarfile

    from inferensics.bundle.report import left_out_lines

    try:
        q = json.loads(_bundle_file(bundle, "report/qualification.json"))
    except (OSError, KeyError, ValueError, tarfile.TarError):
        return []  # the accuracy line says the report is unreadable
    return [line[0].lower() + line[1:].removesuffix(".") for line in left_out_lines(q)]


def _kernel_evidence_of(bundle: Path, manifest: Any) -> str:
    """The kernel evidence sentence of a bundle (a directory or a packed file; not verified): its device and
    whether a load on this host would follow it."""
    import tarfile

    from inferensics.bundle.build import KERNEL_EVIDENCE
    from inferensics.bundle.load import kernel_evidence_line
    from inferensics.kernels.evidence import EvidenceError, parse_evidence

    signed = {r.name: r.digest for r in manifest.resources}.get(KERNEL_EVIDENCE)
    if signed is None:
        return kernel_evidence_line(manifest, None)
    try:
        data = _bundle_file(bundle, KERNEL_EVIDENCE)
    except (OSError, KeyError, tarfile.TarError):
        return f"kernel evidence: no readable {KERNEL_EVIDENCE} in the bundle"
    if hashlib.sha256(data).hexdigest() != signed:  # show reads unverified: say what verify would refuse
        return (
            f"kernel evidence: {KERNEL_EVIDENCE} is not the file the manifest signed (its sha256 differs): verify "
            "and a load refuse the bundle; restore the file or rebuild the bundle"
        )
    try:
        doc = parse_evidence(data, KERNEL_EVIDENCE)
    except EvidenceError as exc:
        return f"kernel evidence: {exc}: a load refuses the bundle"
    return kernel_evidence_line(manifest, doc)


def _factor_lines(group: str, factors: Any) -> list[str]:
    """One ``key: value`` line per identity factor, whole (a list as its items, a mapping as compact JSON); a
    source module's digest shortened like a graph key; the kernel registry as each op's provider priority (and
    each shape bucket's, which qualification evidence sets), its providers' requirements left to ``--json``."""
    if not isinstance(factors, dict):
        return [json.dumps(factors)]
    lines = []
    for key, value in sorted(factors.items()):
        if group == "code":  # module: digest of its source
            lines.append(f"{key}: {str(value)[:16]}")
        elif group == "kernel_registry" and key == "ops" and isinstance(value, dict):
            lines.append(f"ops: {len(value)} (providers and their requirements: --json)")
        elif group == "kernel_registry" and key == "policy" and isinstance(value, dict):
            for op, policy in sorted(value.items()):
                lines.append(f"policy.{op}: {' > '.join(policy.get('priority', []))}")
                lines += [  # what qualification evidence set per shape bucket: hosts dispatch on these first
                    f"policy.{op} {bucket}: {' > '.join(order)}"
                    for bucket, order in sorted(dict(policy.get("bucket_priority") or {}).items())
                ]
                lines += [
                    f"policy.{op} refused: {r.get('provider')} at {r.get('bucket')} ({r.get('reason')})"
                    for r in policy.get("refused", [])
                ]
        elif isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
            lines.append(f"{key}: {', '.join(map(str, value)) if value else '(none)'}")
        elif isinstance(value, dict | list):
            lines.append(f"{key}: {json.dumps(value, sort_keys=True)}")
        else:
            lines.append(f"{key}: {value if value != '' else '(none)'}")
    return lines


def _intact_manifest_of(path: Path) -> Any:
    """A bundle directory's or packed file's manifest, once every file matches its sha256 there (the signature
    is not checked: that is `bundle verify`'s, with a keyring).

    Raises:
        BundleError: ``tampered`` naming ``path`` and the first file that differs, or the manifest's own error.
    """
    from inferensics import bundle as b
    from inferensics.bundle.verify import check_files

    def checked(directory: Path) -> Any:
        m = b.read_manifest(directory)
        try:
            check_files(directory, m)
        except b.BundleError as exc:
            detail = str(exc).removeprefix(f"{directory}: ")
            raise b.BundleError(
                exc.cause,
                f"{path} is not intact: {detail}: diff compares only bundles whose files match their "
                "manifest (`inferensics bundle verify` checks one; rebuild or pull it again)",
            ) from None
        return m

    if path.is_file():
        with tempfile.TemporaryDirectory(prefix="inferensics-bundle-") as tmp:
            return checked(b.unpack(path, Path(tmp) / "bundle"))
    return checked(path)


@bundle_app.command()
def diff(
    a: Annotated[Path, typer.Argument(help="First bundle (directory or packed file).")],
    b_: Annotated[Path, typer.Argument(metavar="B", help="Second bundle.")],
) -> None:
    """Which identity factors differ, grouped (exit 1 when any differ). Each side's files are checked against
    its manifest first: a bundle whose files were altered is refused (signatures are `bundle verify`'s)."""
    from inferensics import bundle as b

    with _errors():
        ma, mb = _intact_manifest_of(a), _intact_manifest_of(b_)
    changes = b.diff(ma, mb)
    console.print(b.render_diff(ma, mb, changes), markup=False)
    if changes:
        raise typer.Exit(1)


@bundle_app.command()
def pack(
    bundle: Annotated[Path, typer.Argument(help="Bundle directory.")],
    out: Annotated[Path, typer.Option("--out", help="File to write (an existing one only with --force).")],
    force: Annotated[bool, typer.Option("--force", help="Replace an existing --out file.")] = False,
) -> None:
    """Pack a bundle directory into one file, refusing one whose files do not match its manifest (each file is
    checked against its sha256 as it is packed; the signature is `bundle verify`'s)."""
    from inferensics import bundle as b

    with _errors():
        b.pack(bundle, out, overwrite=force)
    console.print(f"packed {out}")


@bundle_app.command()
def unpack(
    archive: Annotated[Path, typer.Argument(help="Packed bundle.")],
    out: Annotated[Path, typer.Option("--out", help="Directory to create.")],
) -> None:
    """Unpack a packed bundle (verify it afterwards)."""
    from inferensics import bundle as b

    with _errors():
        b.unpack(archive, out)
    console.print(f"unpacked {out}")


# --- the store: push, pull, states -----------------------------------------------------------------------


class _Store:
    """Events and reads through a service or a store DSN."""

    def __init__(self, service: str | None, token: str | None, dsn: str | None) -> None:
        self.service, self.token, self.dsn = service, token, dsn
        self._initialised = False

    @contextlib.contextmanager
    def _opened(self) -> Iterator[Store]:
        """The store ``--dsn`` names, refused in one line (and left uncreated) when it was never initialised:
        its tables are missing, which the engine said as a traceback."""
        from inferensics.cli.store_paths import FOLDER_KINDS, folder_kind
        from inferensics.schema.dsn import DsnError, resolve_dsn
        from inferensics.schema.store import Store

        try:
            parsed = resolve_dsn(self.dsn)
        except DsnError as exc:
            fail(str(exc))
        kind = folder_kind(parsed.path) if parsed.kind == "chdb" and parsed.path is not None else "store"
        if kind in FOLDER_KINDS:  # opening would make the engine's files there (as `inferensics status` refuses to)
            fail(f"no store at {parsed.path}: it is {FOLDER_KINDS[kind]}, not a store; pass the --dsn of an "
                 "existing store")  # fmt: skip
        if kind != "store":
            fail(f"no store at {parsed.path}: it is not initialised; create it with `inferensics init` (the same "
                 "--dsn or --data-dir)")  # fmt: skip
        with Store.open(parsed) as store:
            if not self._initialised:
                if store.schema_version() == 0:
                    fail(f"store {store.dsn} is not initialised: run `inferensics init` (the same --dsn or --data-dir)")
                self._initialised = True
            yield store

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        """Rows of ``sql``.

        Raises:
            ServiceError: the service refused or could not answer.
            StoreError: the store could not answer.
        """
        from inferensics.collector.client import ServiceClient

        if self.service:
            with ServiceClient(self.service, token=self.token) as client:
                return list(client.sql(sql).iter_rows())
        with self._opened() as store:
            return store.query_rows(sql.replace("FROM ", f"FROM {store.database}.", 1))

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        """Rows of ``sql``, or one line and a non-zero exit."""
        from inferensics.collector.client import ServiceError
        from inferensics.schema.store import StoreError

        try:
            return self.query(sql)
        except ServiceError as exc:
            fail(self._refused_line(exc))
        except StoreError as exc:
            fail(str(exc))

    def _refused_line(self, exc: Any, written: str = "") -> str:
        """The line of a failed read: a token the SQL API refuses (403) named with the role it needs (it read
        ``POST /api/v1/sql: 403 token lacks the 'admin' role``), else :func:`service_line`."""
        if exc.status != 403:
            return service_line(exc)
        return (f"the service at {self.service} refused this token its SQL API ({exc.detail}): the bundle commands "
                "read and confirm releases there, so they need a token with the admin role (--token or "
                f"$INFERENSICS_TOKEN){written}")  # fmt: skip

    def require_sql(self) -> None:
        """Refuse, before anything is written, a token the service's SQL API refuses: a write through the
        service is confirmed there (``_wait_written``), and that API takes only admin tokens."""
        from inferensics.collector.client import ServiceError

        if not self.service:
            return
        try:
            self.query("SELECT 1")
        except ServiceError as exc:
            fail(self._refused_line(exc, "; nothing was written"))

    def record(self, event: Any) -> None:
        from inferensics.schema.store import StoreError

        if self.service:
            from inferensics.collector.host.otlp_exporter import OtlpExporter

            exporter = OtlpExporter(self.service, host="inferensics-cli", token=self.token)
            try:
                exporter.export_records([event])
                exporter.flush()
                if not exporter.health.stats()["export_spans_sent"]:
                    fail(f"the service did not take the {event.state} record: {exporter.health.last_error}")
            finally:
                exporter.shutdown()
            self._wait_written(event)
            return
        try:
            with self._opened() as store:
                store.insert_events([event])
        except StoreError as exc:
            fail(str(exc))

    def _wait_written(self, event: Any, timeout_s: float = 30.0) -> None:
        """Until the service has written ``event`` (a state it acknowledged reaches the store with its next
        batch): the command that follows, such as ``bundle states`` after ``bundle revoke``, must see it.

        The service took the record: a confirmation that cannot be read is said in a line, not an error exit
        (the write happened; a retry would record it twice)."""
        from inferensics.collector.client import ServiceError

        at = event.ts.strftime("%Y-%m-%d %H:%M:%S.%f")
        sql = (
            f"SELECT count() FROM bundle_states WHERE bundle_id = '{event.bundle_id}' AND state = '{event.state}' "
            f"AND ts = toDateTime64('{at}', 6, 'UTC')"
        )
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if self.query(sql)[0][0]:
                    return
            except ServiceError as exc:
                console.print(
                    f"warning: the service took the {event.state} record of bundle {event.bundle_id[:12]}, but "
                    f"its write could not be confirmed ({service_line(exc)}): check `inferensics status --service "
                    f"{self.service}`",
                    markup=False,
                )
                return
            if time.monotonic() > deadline:
                fail(
                    f"the service took the {event.state} record of bundle {event.bundle_id[:12]} but has not written "
                    f"it after {timeout_s:g} s: check `inferensics status --service {self.service}`"
                )
            time.sleep(0.2)


def _sql_text(value: str) -> str:
    """``value`` as a ClickHouse string literal's contents (quotes and backslashes escaped); text that is not UTF-8
    (an argument's bytes that do not decode) is one line, not the client's UnicodeEncodeError."""
    shown = undecodable(value)
    if shown is not None:
        fail(f"'{shown}' is not UTF-8 text: the store's names are UTF-8; check the shell's quoting or the terminal's "
             "encoding")  # fmt: skip
    return value.replace("\\", "\\\\").replace("'", "\\'")


def _resolve_id(store: _Store, prefix: str) -> tuple[str, str]:
    """(full bundle id, model) of a known bundle id or unique prefix.

    The model is the label the traffic uses, the one the dashboard's bundle and canary views join requests on:
    the label of the bundle's first host registration (what its hosts serve it as), else the one its first state
    event carries (``bundle push --model``), else none. A push named the manifest's factory (``model:build``),
    and every state event after it copied that label, so a promoted bundle's events never met its traffic."""
    p = prefix.strip().lower()
    if not p or any(c not in "0123456789abcdef" for c in p):
        fail(f"{prefix!r} is not a bundle id (hex digits of `bundle show`)")
    rows = store.rows(
        f"SELECT bundle_id, argMinIf(model, ts, model != ''), 0 FROM bundle_states WHERE startsWith(bundle_id, '{p}') "
        f"GROUP BY bundle_id UNION ALL SELECT bundle_id, argMinIf(model, ts, model != ''), 1 FROM bundles "
        f"WHERE startsWith(bundle_id, '{p}') GROUP BY bundle_id"
    )
    ids = {str(r[0]) for r in rows}
    if not ids:
        fail(f"unknown bundle id {prefix}: push it (`inferensics bundle push`) or register it on a host first")
    if len(ids) > 1:
        fail(f"bundle id prefix {prefix} matches {len(ids)} bundles: give more digits")
    full = ids.pop()
    # registrations (source 1) first: the hosts' label is the traffic's
    labels = sorted((-int(source), str(model)) for i, model, source in rows if str(i) == full and model)
    return full, labels[0][1] if labels else ""


def _channels_in_use(store: _Store) -> list[str]:
    """The channels any bundle was ever promoted on, in name order."""
    rows = store.rows(
        "SELECT DISTINCT channel FROM bundle_states WHERE state = 'promoted' AND channel != '' ORDER BY channel"
    )
    return [str(r[0]) for r in rows]


def _in_use_text(channels: list[str]) -> str:
    return f"channels in use: {', '.join(channels)}" if channels else "no channel is in use yet"


STANDARD_CHANNELS = frozenset({"production", "canary", "staging"})
"""Channel names a first promotion may use without ``--new-channel`` (the usual ones: a fresh store's first
``promote --channel production`` is no typo)."""


def _refuse_new_channel(store: _Store, channel: str) -> None:
    """Stop a promotion on a channel no bundle was promoted on (a typo such as ``prodution`` made a channel of
    its own, and the bundle state then read "promoted on prodution" while production kept its old bundle)."""
    in_use = _channels_in_use(store)
    if channel not in in_use and channel not in STANDARD_CHANNELS:
        fail(
            f"no bundle was ever promoted on channel {channel!r} ({_in_use_text(in_use)}; production, canary and "
            "staging need no flag): check the name, or pass --new-channel to start a new channel"
        )


def _refused_states(store: _Store) -> dict[str, str]:
    """Bundle id → ``revoked`` or ``quarantined``: the ids hosts refuse (what `bundle states` writes).

    A revocation is final (a release lifts only a quarantine); a quarantine holds until a later release."""
    rows = store.rows(
        "SELECT bundle_id, countIf(state = 'revoked') > 0, argMaxIf(state, ts, state != 'revoked') "
        "FROM bundle_states WHERE state IN ('revoked', 'quarantined', 'released') GROUP BY bundle_id"
    )
    return {
        str(i): "revoked" if revoked else "quarantined" for i, revoked, held in rows if revoked or held == "quarantined"
    }


def _refuse_if_held(state: str, store: _Store, full: str) -> None:
    """Stop a promotion of a bundle hosts refuse to load, and a release of a revoked one (final)."""
    held = _refused_states(store).get(full) if state in ("promoted", "released") else None
    if held == "revoked" and state == "released":
        fail(
            f"bundle {full[:12]} is revoked, and a revocation is final (hosts keep refusing it): "
            "build and promote another bundle"
        )
    if held == "quarantined" and state == "promoted":
        fail(
            f"bundle {full[:12]} is quarantined, so hosts refuse to load it: lift the quarantine first "
            f"(`inferensics bundle release {full[:12]}`) or promote another bundle"
        )
    if held == "revoked":
        fail(f"bundle {full[:12]} is revoked, so hosts refuse to load it: promote another bundle")


def _rollback_target(store: _Store, channel: str, full: str) -> str:
    """The newest bundle promoted on ``channel`` before ``full`` that is not revoked, or "" when there is none.

    The channel's last bundle may have been revoked since its promotion: hosts refuse it, so rolling back to it
    is no rollback; the one before it is."""
    rows = store.rows(
        f"SELECT bundle_id, max(ts) AS last FROM bundle_states WHERE channel = '{channel.replace(chr(39), '')}' "
        "AND state = 'promoted' GROUP BY bundle_id ORDER BY last DESC"
    )
    revoked = {i for i, held in _refused_states(store).items() if held == "revoked"}
    return next((str(i) for i, _ in rows if i and str(i) != full and str(i) not in revoked), "")


def _state(state: str, bundle_id: str, service: str | None, token: str | None, dsn: str | None, *,
           channel: str = "", reason: str = "", actor: str = "", new_channel: bool = False) -> None:  # fmt: skip
    from inferensics.schema.events import BundleStateEvent

    store = _Store(service, token, dsn)
    full, model = _resolve_id(store, bundle_id)
    previous = ""
    _refuse_if_held(state, store, full)
    if state == "promoted":
        if not new_channel:
            _refuse_new_channel(store, channel)
        previous = _rollback_target(store, channel, full)
    store.record(
        BundleStateEvent(
            ts=datetime.now(UTC),
            bundle_id=full,
            state=state,
            channel=channel,
            model=model,
            previous_bundle_id=previous,
            actor=actor,
            reason=reason,
        )
    )
    if previous:
        extra = f" on {channel} (previous {previous[:12]} kept for rollback)"
    elif state == "promoted":
        extra = f" on {channel} (no rollback target: no earlier bundle on {channel} that is not revoked)"
    else:
        extra = f" on {channel}" if channel else ""
    console.print(f"{state} {full[:16]}{extra}")


ReasonOption = Annotated[str, typer.Option("--reason", help="Why (recorded with the state).")]
ActorOption = Annotated[str, typer.Option("--actor", help="Who (recorded with the state).")]


@bundle_app.command()
@needs_extra("service", "bundle promote")
def promote(  # noqa: PLR0917 - one option each
    ctx: typer.Context,
    bundle_id: Annotated[str, typer.Argument(help="Bundle id (or unique prefix).")],
    channel: Annotated[
        str, typer.Option("--channel", help="Release channel: production, canary, staging, one a bundle was "
                                            "promoted on before, or a new free-form name with --new-channel.")
    ],
    service: ServiceOption = None, token: TokenOption = None, dsn: DsnOption = None, data_dir: DataDirOption = None,
    reason: ReasonOption = "", actor: ActorOption = "",
    new_channel: Annotated[bool, typer.Option("--new-channel", help="Start a channel no bundle was promoted on yet "
                                              "(without it such a name is refused, as a typo would be).")] = False,
) -> None:  # fmt: skip
    """Promote a bundle on a channel: its whole artifact set replaces the channel's (the newest earlier one not
    revoked stays for rollback: promote it again to roll back). Channels are free-form names; a name no bundle
    was promoted on (other than production, canary, staging) is refused unless --new-channel, and a revoked or
    quarantined bundle is refused."""
    if not channel.strip():
        fail("--channel is empty: name the release channel (e.g. --channel production)")
    _state(
        "promoted", bundle_id, service, token, dsn_from(ctx, dsn, data_dir), channel=channel, reason=reason,
        actor=actor, new_channel=new_channel,
    )  # fmt: skip


@bundle_app.command()
@needs_extra("service", "bundle revoke")
def revoke(  # noqa: PLR0917 - one option each
    ctx: typer.Context,
    bundle_id: Annotated[str, typer.Argument(help="Bundle id (or unique prefix).")],
    service: ServiceOption = None, token: TokenOption = None, dsn: DsnOption = None, data_dir: DataDirOption = None,
    reason: ReasonOption = "", actor: ActorOption = "",
) -> None:  # fmt: skip
    """Revoke a bundle: hosts refuse to load it (after their states file is refreshed)."""
    _state("revoked", bundle_id, service, token, dsn_from(ctx, dsn, data_dir), reason=reason, actor=actor)


@bundle_app.command()
@needs_extra("service", "bundle quarantine")
def quarantine(  # noqa: PLR0917 - one option each
    ctx: typer.Context,
    bundle_id: Annotated[str, typer.Argument(help="Bundle id (or unique prefix).")],
    service: ServiceOption = None, token: TokenOption = None, dsn: DsnOption = None, data_dir: DataDirOption = None,
    reason: ReasonOption = "", actor: ActorOption = "",
) -> None:  # fmt: skip
    """Quarantine a bundle until it is released."""
    _state("quarantined", bundle_id, service, token, dsn_from(ctx, dsn, data_dir), reason=reason, actor=actor)


@bundle_app.command()
@needs_extra("service", "bundle release")
def release(  # noqa: PLR0917 - one option each
    ctx: typer.Context,
    bundle_id: Annotated[str, typer.Argument(help="Bundle id (or unique prefix).")],
    service: ServiceOption = None, token: TokenOption = None, dsn: DsnOption = None, data_dir: DataDirOption = None,
    reason: ReasonOption = "", actor: ActorOption = "",
) -> None:  # fmt: skip
    """Lift a quarantine (a revoked bundle stays revoked)."""
    _state("released", bundle_id, service, token, dsn_from(ctx, dsn, data_dir), reason=reason, actor=actor)


@bundle_app.command()
@needs_extra("service", "bundle states")
def states(  # noqa: PLR0917 - one option each
    ctx: typer.Context,
    out: Annotated[Path, typer.Option("--out", help="States file for hosts ($INFERENSICS_BUNDLE_STATES).")],
    service: ServiceOption = None, token: TokenOption = None, dsn: DsnOption = None, data_dir: DataDirOption = None,
) -> None:  # fmt: skip
    """Write the revoked and quarantined bundle ids hosts must refuse."""
    from inferensics.bundle import BundleStates

    refused = _refused_states(_Store(service, token, dsn_from(ctx, dsn, data_dir)))
    revoked = frozenset(i for i, s in refused.items() if s == "revoked")
    quarantined = frozenset(i for i, s in refused.items() if s == "quarantined")
    with _errors():
        BundleStates(revoked, quarantined).write(out)
    console.print(f"wrote {out}: {len(revoked)} revoked, {len(quarantined)} quarantined")


@bundle_app.command()
@needs_extra("service", "bundle push")
def push(  # noqa: PLR0917 - one option each
    bundle: Annotated[Path, typer.Argument(help="Bundle directory.")],
    service: ServiceOption = None, token: TokenOption = None,
    keyring: Annotated[Path | None, typer.Option(
        "--keyring", show_default=False,
        help="Trusted builders' public keys (or $INFERENSICS_BUNDLE_KEYRING): the signature is checked before the "
             "upload. Without one the push checks every file against the manifest's sha256 and says that the "
             "signature was not checked (hosts check it on every load).")] = None,
    replace: Annotated[bool, typer.Option(
        "--replace", help="Upload even when the service holds other bytes under this bundle id (pulls then "
                          "serve this copy).")] = False,
    model: Annotated[str | None, typer.Option(
        "--model", show_default=False,
        help="The model label its hosts serve it under (instrument(model=...)), recorded on its push and states so "
             "that the dashboard lists it with that model's traffic before a host registers it. Default: the "
             "label hosts registered it with, else none (the manifest's factory is recorded apart).")] = None,
) -> None:  # fmt: skip
    """Upload a bundle (packed) through the service's blob API and record it. A bundle whose files do not match
    its manifest is refused, and so is one whose bytes differ from what the service already holds under the
    same bundle id (unless --replace)."""
    from inferensics import bundle as b
    from inferensics.bundle.dsse import verify_envelope
    from inferensics.bundle.keys import KEYRING_ENV
    from inferensics.bundle.manifest import MANIFEST_FILE, parse_manifest, read_manifest_bytes
    from inferensics.bundle.pack import pack_bytes
    from inferensics.collector.client import ServiceClient, ServiceError
    from inferensics.schema.events import BundleStateEvent

    if not service:
        fail("push needs --service URL (or $INFERENSICS_SERVICE_URL)")
    with _errors():
        # The manifest is read once: its signature is checked on these bytes, the files they list are checked and
        # packed with them, and these bytes are what is sent (a manifest swapped on disk meanwhile is not).
        raw = read_manifest_bytes(bundle)
        m, payload, sigs = parse_manifest(raw, str(bundle / MANIFEST_FILE))
        trusted = keyring is not None or bool(os.environ.get(KEYRING_ENV))
        signer = verify_envelope(payload, sigs, b.Keyring.load(keyring), str(bundle / MANIFEST_FILE)) if trusted else ""
    store = _Store(service, token, None)
    store.require_sql()  # before anything is written: the push is confirmed through the SQL API
    try:
        with _errors():
            data = pack_bytes(bundle, manifest=raw)  # refuses a file that differs from the manifest
        digest = hashlib.sha256(data).hexdigest()
        sql = (
            f"SELECT DISTINCT attrs['pack_blob'] FROM bundle_states WHERE bundle_id = '{m.bundle_id}' "
            "AND state = 'pushed'"
        )
        held = {str(r[0]) for r in store.rows(sql) if r[0]}  # what pulls of this id may serve now
        if held - {digest} and not replace:
            other = sorted(held - {digest})[0]
            fail(f"the service already holds bundle {m.bundle_id[:12]} as other bytes (blob {other[:12]}; this "
                 f"copy packs to {digest[:12]}): a bundle id must name one set of files; pull and verify the "
                 "one it holds, or pass --replace to make this copy the one pulls serve; nothing was "
                 "uploaded")  # fmt: skip
        with ServiceClient(service, token=token) as client:
            sha = client.put_blob(data, "bundle", "application/x-tar")
    except ServiceError as exc:
        fail(service_line(exc))
    label = model.strip() if model is not None else _registered_model(store, m.bundle_id)
    factory = str(m.identity.get("model", {}).get("factory", ""))
    store.record(
        BundleStateEvent(
            ts=datetime.now(UTC),
            bundle_id=m.bundle_id,
            state="pushed",
            # named before any host registers it; the factory beside, never as the model label
            attrs={"pack_blob": sha, "bundle_name": m.name, "factory": factory},
            model=label,
        )
    )
    checked = (
        f"signed by {signer[:16]}, {len(m.resources)} files match"
        if signer
        else f"{len(m.resources)} files match; signature not checked (no --keyring or ${KEYRING_ENV})"
    )
    console.print(f"pushed {m.name} {m.bundle_id} as blob {sha} ({checked})", markup=False)
    if not label:
        console.print("no model label recorded (no host has registered this bundle): pass --model NAME, the name "
                      "its hosts serve it under, to list it with that model's traffic before one does",
                      markup=False)  # fmt: skip


def _registered_model(store: _Store, bundle_id: str) -> str:
    """The model label the first host that registered the bundle gave it (the traffic's), or ``""``."""
    rows = store.rows(f"SELECT argMinIf(model, ts, model != '') FROM bundles WHERE bundle_id = '{bundle_id}'")
    return str(rows[0][0] or "") if rows else ""


def _promoted_on(store: _Store, channel: str) -> str:
    """The full id of the bundle promoted on ``channel`` now, or one line saying why there is none to pull."""
    rows = store.rows(
        f"SELECT argMax(bundle_id, ts), argMax(state, ts) FROM bundle_states WHERE channel = '{_sql_text(channel)}' "
        "AND state IN ('promoted', 'demoted')"
    )
    if not rows or not rows[0][0]:
        fail(f"no bundle is promoted on channel {channel!r} ({_in_use_text(_channels_in_use(store))}): check the "
             "name, or pull by bundle id")  # fmt: skip
    full, state = str(rows[0][0]), str(rows[0][1])
    if state != "promoted":
        fail(f"no bundle is promoted on channel {channel!r} now: its last bundle {full[:12]} was {state}; promote "
             f"one (`inferensics bundle promote ID --channel {channel}`) or pull by bundle id")  # fmt: skip
    held = _refused_states(store).get(full)
    if held:
        fail(f"bundle {full[:12]}, promoted on {channel}, is {held}, so hosts refuse to load it: promote another "
             f"bundle on {channel}, or pull it by id ({full[:12]}) to investigate it")  # fmt: skip
    return full


@bundle_app.command()
@needs_extra("service", "bundle pull")
def pull(
    out: Annotated[Path, typer.Option("--out", help="Directory to create.")],
    bundle_id: Annotated[str | None, typer.Argument(help="Bundle id (or unique prefix); or --channel.",
                                                    show_default=False)] = None,
    channel: Annotated[str | None, typer.Option("--channel", help="Pull the bundle promoted on this channel now.",
                                                show_default=False)] = None,
    service: ServiceOption = None, token: TokenOption = None,
) -> None:  # fmt: skip
    """Download a pushed bundle, by id or the one promoted on a channel, and unpack it (verify it before loading)."""
    from inferensics import bundle as b
    from inferensics.bundle.pack import check_unpack_target
    from inferensics.collector.client import ServiceClient, ServiceError

    if (bundle_id is None) == (channel is None):
        fail("pass a bundle id or --channel NAME (one of them): which bundle to pull")
    if channel is not None and not channel.strip():
        fail("--channel is empty: name the release channel (e.g. --channel production)")
    if not service:
        fail("pull needs --service URL (or $INFERENSICS_SERVICE_URL)")
    with _errors():
        check_unpack_target(out)  # before the download
    store = _Store(service, token, None)
    full = _promoted_on(store, channel) if channel is not None else _resolve_id(store, str(bundle_id))[0]
    rows = store.rows(f"SELECT argMax(attrs['pack_blob'], ts) FROM bundle_states WHERE bundle_id = '{full}' "
                      "AND state = 'pushed'")  # fmt: skip
    if not rows or not rows[0][0]:
        fail(f"bundle {full[:16]} was never pushed: push it first")
    try:
        with ServiceClient(service, token=token) as client:
            data = client.get_blob(str(rows[0][0]))
    except ServiceError as exc:
        fail(service_line(exc))
    with tempfile.TemporaryDirectory(prefix="inferensics-pull-") as tmp:
        archive = Path(tmp) / "bundle.tar"
        archive.write_bytes(data)
        with _errors():
            b.unpack(archive, out)
    on = f" (promoted on {channel})" if channel is not None else ""
    console.print(f"pulled {full}{on} into {out}", markup=False)


def register(app: typer.Typer) -> None:
    """Add ``inferensics bundle ...``."""
    app.add_typer(bundle_app, name="bundle")
