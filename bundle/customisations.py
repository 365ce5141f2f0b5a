"""Compiler customisations the serving code installs, recorded by import path and code digest.

A fresh process reinstalls exactly the recorded compiler: it imports each customisation by its import
path, refuses it when the code's digest differs from the manifest's, and installs it (a decomposition into
Inductor's table, an FX pass into its config slot, a custom op by importing the module that registers it).

What a bundle load installs stays for the process (its graphs compile with it) until the next load, which
replaces it (:func:`install_loaded`: exactly the last loaded bundle's customisations); a build in that process
compiles with its own customisations only: :func:`build_scope` sets the loads' aside for the build and puts
them back after, and :func:`refuse_undeclared` refuses a pass or decomposition set by other code that the
build does not record (the signed identity would not say what compiled).
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final, Literal

import torch
from pydantic import BaseModel, ConfigDict

from inferensics.bundle import torch_adapter
from inferensics.bundle.canonical import sha256_hex
from inferensics.bundle.errors import BundleError

Kind = Literal["decomposition", "fx_pass", "custom_op"]
KINDS: Final = ("decomposition", "fx_pass", "custom_op")
DEFAULT_FX_PASS_SLOT: Final = "post_grad_custom_post_pass"
"""The Inductor slot an FX pass goes into when none is named (``bundle build --fx-pass module:name``)."""


class Customisation(BaseModel):
    """One compiler customisation."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Kind
    """``decomposition``, ``fx_pass`` or ``custom_op``."""
    target: str
    """The op it decomposes or registers (``aten.silu.default``), or the FX pass slot."""
    import_path: str
    """``module:qualname`` of the function (for a custom op, ``module:`` of the registering module)."""
    code_digest: str
    """sha256 of the function's source (for a custom op, of the module's source)."""


def _resolve(import_path: str) -> Any:
    module_name, _, qualname = import_path.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in filter(None, qualname.split(".")):
        obj = getattr(obj, part)
    return obj


def code_digest(obj: Any) -> str:
    """sha256 of an object's source code (a function, class or module; a ``CustomGraphPass`` object: its class's)."""
    if torch_adapter.is_custom_graph_pass(obj):
        obj = type(obj)  # an instance has no source of its own: its class is the code that runs
    try:
        return sha256_hex(inspect.getsource(obj).encode())
    except (OSError, TypeError):  # no source (a builtin, code built at run time): digest the bytecode
        code = getattr(obj, "__code__", None)
        return sha256_hex(code.co_code if code is not None else repr(obj).encode())


def describe(kind: Kind, target: str, obj: Callable[..., Any] | Any) -> Customisation:
    """Record a customisation from the object the serving code installs.

    Args:
        kind: ``decomposition``, ``fx_pass`` or ``custom_op``.
        target: Op name (``aten.silu.default``) or FX pass slot (``post_grad_custom_post_pass``).
        obj: The function (decomposition), the pass (a module-level ``CustomGraphPass`` instance with a
            ``uuid()``) or the module that registers a custom op.

    Raises:
        BundleError: ``bad_input`` when it is not importable by a module-level name, or is an FX pass for a slot
            this torch's Inductor does not have or whose graphs the bundle could not carry (:func:`fx_pass_problem`).
    """
    if kind == "fx_pass":
        refuse_unknown_slot(target)
    path = _import_path(obj)
    if "<locals>" in path or "<lambda>" in path:
        raise BundleError("bad_input", f"customisation {path} is not importable: define it at module level")
    c = Customisation(kind=kind, target=target, import_path=path, code_digest=code_digest(obj))
    problem = fx_pass_problem(c, obj)
    if problem is not None:
        raise BundleError("bad_input", problem)
    return c


def _import_path(obj: Any) -> str:
    """``module:qualname`` of a function or class, ``module:`` of a module, ``module:name`` of an object (a
    ``CustomGraphPass`` instance) bound to ``name`` at its class's module level."""
    if inspect.ismodule(obj):
        return f"{obj.__name__}:"
    qualname = getattr(obj, "__qualname__", None)
    if isinstance(qualname, str):
        return f"{obj.__module__}:{qualname}"
    cls = type(obj)
    module = getattr(sys.modules.get(cls.__module__), "__dict__", {})
    names = sorted(n for n, v in module.items() if v is obj)
    if not names:
        raise BundleError(
            "bad_input",
            f"customisation {cls.__module__}:{cls.__qualname__} (an instance) is not importable: bind it to a "
            f"module-level name in {cls.__module__} (my_pass = {cls.__qualname__}()) and pass that",
        )
    return f"{cls.__module__}:{names[0]}"


def refuse_unknown_slot(slot: str) -> None:
    """Refuse an FX pass slot this torch's Inductor does not have (installing into it would set a config name that
    nothing reads, or raise from inside Inductor's config).

    Raises:
        BundleError: ``bad_input`` naming the slot and the slots there are.
    """
    slots = torch_adapter.fx_pass_slots()
    if slot not in slots:
        raise BundleError(
            "bad_input",
            f"FX pass slot {slot!r}: Inductor (torch {torch.__version__}) has no such slot; name one of "
            f"{', '.join(slots)} (default {DEFAULT_FX_PASS_SLOT})",
        )


def fx_pass_problem(c: Customisation, obj: Any) -> str | None:
    """Why the bundle cannot carry the graphs compiled with ``obj`` (``c``'s resolved FX pass), or ``None``.

    Inductor keys its FX-graph cache by a pass's ``uuid()``; a pass without one makes it compile every graph
    past the cache, so the build has no cache entry to carry and every host would compile the graph itself.
    """
    why = torch_adapter.fx_pass_cache_bypass(c.target, obj) if c.kind == "fx_pass" else None
    if why is None:
        return None
    return (
        f"the FX pass {c.import_path} {why}: Inductor bypasses its cache for it, so the bundle cannot carry the "
        "graph; give it a uuid() by subclassing torch._inductor.custom_graph_pass.CustomGraphPass (and pass a "
        "module-level instance of it)"
    )


def refuse_uncarried_fx_passes(customisations: Iterable[Customisation]) -> None:
    """Refuse, before anything is compiled, an FX pass whose graphs a bundle could not carry (:func:`fx_pass_problem`).

    Raises:
        BundleError: ``bad_input`` naming the pass, the cause and the fix; ``customisation`` when a pass cannot
            be imported or changed since it was recorded.
    """
    for c in customisations:
        if c.kind == "fx_pass":
            problem = fx_pass_problem(c, resolve_checked(c))
            if problem is not None:
                raise BundleError("bad_input", f"{problem}: nothing was compiled or signed")


def resolve_checked(c: Customisation) -> Any:
    """Import a recorded customisation and check its code digest.

    Raises:
        BundleError: ``customisation`` when it cannot be imported or its code changed.
    """
    try:
        obj = _resolve(c.import_path)
    except (ImportError, AttributeError) as exc:
        raise BundleError("customisation", f"customisation {c.import_path} cannot be imported here: {exc}") from None
    digest = code_digest(obj)
    if digest != c.code_digest:
        raise BundleError(
            "customisation",
            f"customisation {c.import_path} changed since the bundle was built "
            f"(code digest {digest[:12]}, manifest {c.code_digest[:12]}): rebuild the bundle",
        )
    return obj


def install(customisations: Iterable[Customisation], *, lasting: bool = False) -> list[str]:
    """Check every customisation first, then install them all; returns their import paths.

    Args:
        customisations: What to install.
        lasting: Installed for the process (a bundle load): remembered, so that a build in this process sets it
            aside (:func:`build_scope`).

    Raises:
        BundleError: ``customisation`` when one is missing or changed (nothing is installed then).
    """
    resolved = [(c, resolve_checked(c)) for c in customisations]
    for c, obj in resolved:
        if c.kind == "decomposition":
            previous = torch_adapter.inductor_decompositions().get(c.target)
            torch_adapter.install_decomposition(c.target, obj)
        elif c.kind == "fx_pass":
            previous = torch_adapter.fx_pass_slots().get(c.target)
            torch_adapter.install_fx_pass(c.target, obj)
        else:  # custom_op: importing its module registered it
            continue
        if lasting and previous is not obj:
            torch_adapter.remember_lasting(torch_adapter.LastingInstall(c.kind, c.target, obj, previous))
    if resolved:
        # The FX-graph-cache key does not cover decompositions or passes: salt it with the customisations'
        # digests, so graphs compiled with them never share cache entries with graphs compiled without.
        salt = sha256_hex("".join(sorted(c.code_digest + c.target for c, _ in resolved)).encode())[:16]
        torch_adapter.salt_cache_key(f"customisations-{salt}")
        torch_adapter.reset_compiler()
    return [c.import_path for c, _ in resolved]


@contextlib.contextmanager
def build_scope(customisations: Iterable[Customisation] = ()) -> Iterator[None]:
    """The compiler state of a build for the block: what bundle loads installed in this process (FX passes,
    decompositions, the cache-key salt) is set aside, so the build compiles with its own ``customisations`` only
    (installed inside the block); on exit every slot, the decomposition table and the cache-key tag are as on
    entry (a serving host keeps its loaded bundle's compiler)."""
    slots = [c.target for c in customisations if c.kind == "fx_pass"]
    with torch_adapter.compiler_state_restored(slots):
        _set_aside_loaded()
        yield


def install_loaded(customisations: Iterable[Customisation]) -> list[str]:
    """Install a bundle load's ``customisations`` for the process in place of the earlier loads': what an earlier
    load installed and this one does not (a pass in another slot, a decomposition of another op) is put back to
    what its place held before that load, so the compiler holds exactly this bundle's customisations (what its
    graphs were compiled with); returns their import paths.

    Raises:
        BundleError: ``customisation`` when one is missing or changed (checked first: the earlier load's
            customisations then stay installed).
    """
    recorded = list(customisations)
    for c in recorded:
        resolve_checked(c)
    if torch_adapter.lasting_installs() or torch_adapter.cache_key_salted():  # else nothing to replace: no reset
        _set_aside_loaded()
        torch_adapter.forget_lasting()
    return install(recorded, lasting=True)


def _set_aside_loaded() -> None:
    """Put back what each place held before a load installed into it, latest load first, where the load's
    customisation is still what it holds (one the user replaced since is theirs), and drop the loads' salt."""
    for record in reversed(torch_adapter.lasting_installs()):
        if record.kind == "fx_pass" and torch_adapter.fx_pass_slots().get(record.target) is record.installed:
            torch_adapter.install_fx_pass(record.target, record.previous)
        elif (
            record.kind == "decomposition"
            and torch_adapter.inductor_decompositions().get(record.target) is record.installed
        ):
            torch_adapter.restore_decomposition(record.target, record.previous)
    torch_adapter.unsalt_cache_key()
    torch_adapter.reset_compiler()


def refuse_undeclared(customisations: Iterable[Customisation]) -> None:
    """Refuse a build in a process whose compiler holds an FX pass or a decomposition that the build does not
    record among its ``customisations`` (set by serving code, the model's module, or by hand): it would compile
    with it while the signed identity does not say so, and hosts would not install it. Call it inside
    :func:`build_scope`, once the model is made (its module's import may set one), before compiling.

    Raises:
        BundleError: ``bad_input`` naming the slot or op, what holds it, and what to do.
    """
    declared = {(c.kind, c.target): resolve_checked(c) for c in customisations}
    for slot, value in sorted(torch_adapter.fx_pass_slots().items()):
        if value is not None and declared.get(("fx_pass", slot)) is not value:
            raise _undeclared(
                f"Inductor's FX pass slot {slot} holds {_held_name(value)}", f"--fx-pass {slot}=module:name"
            )
    for op, fn in sorted(torch_adapter.foreign_decompositions().items()):
        if declared.get(("decomposition", op)) is not fn:
            raise _undeclared(
                f"Inductor's decomposition of {op} is {_held_name(fn)}", f"--decomposition {op}=module:function"
            )


def _undeclared(what: str, declare: str) -> BundleError:
    return BundleError(
        "bad_input",
        f"{what} in this process, which this build does not record among its customisations: declare it ({declare}) "
        "or unset it before building, so that the signed identity says what compiled: nothing was compiled or signed",
    )


def _held_name(obj: Any) -> str:
    """``module:name`` of what a slot or table entry holds, as a message names it."""
    try:
        return _import_path(obj)
    except BundleError:
        return f"an instance of {type(obj).__module__}.{type(obj).__qualname__}"
