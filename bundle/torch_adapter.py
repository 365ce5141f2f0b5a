"""The one module of the bundle part that touches PyTorch's private APIs (ARCHITECTURE decision 8).

Used here: Inductor's ``compile_fx`` (with ``config_patches``), ``torch_key``/``triton_key``, the config
modules' entries and defaults, the ``torch.__trace`` logger (FX-graph-cache keys, output code, guards, graph
breaks as they are emitted), ``CacheArtifactManager.clear``, the decomposition tables, the FX-graph cache's rule
for custom passes (``CustomGraphPass`` and its ``uuid()``), and ``aoti_load_package``. All exist in torch 2.11
and 2.13 (see the hook table in shared/research/torch-compile-internals.md).
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import torch

TRACE_LOGGER: Final = "torch.__trace"
_CAPTURED: Final = frozenset(
    {
        "fx_graph_cache_hit",
        "fx_graph_cache_miss",
        "fx_graph_cache_bypass",
        "aotautograd_cache_hit",
        "aotautograd_cache_miss",
        "aotautograd_cache_bypass",
        "dynamo_graph_break_reason",
        "recompile_reasons",
    }
)


def torch_key() -> str:
    """Hex of Inductor's ``torch_key()`` (version plus a hash of the whole torch source tree)."""
    from torch._inductor.codecache import torch_key as key

    return key().hex()


def triton_key() -> str:
    """Triton's cache key of its own source (empty when Triton is not importable)."""
    try:
        from torch._inductor.codecache import triton_key as key

        return str(key() or "")
    except Exception:
        return ""


def _render(value: Any) -> Any:
    """A config value as deterministic JSON (callables by import path, sets sorted, the rest repr)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_render(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((_render(v) for v in value), key=repr)
    if isinstance(value, dict):
        return {str(k): _render(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if callable(value):
        uuid = getattr(value, "uuid", None)
        if callable(uuid):  # Inductor's CustomGraphPass: its uuid is its cache identity
            with contextlib.suppress(Exception):
                return f"pass:{uuid()}"
        name = getattr(value, "__qualname__", type(value).__qualname__)
        return f"{getattr(value, '__module__', '?')}:{name}"
    return repr(value)


def _config_modules() -> dict[str, Any]:
    import torch._dynamo.config as dynamo
    import torch._functorch.config as functorch
    import torch._inductor.config as inductor
    import torch.compiler.config as compiler

    return {"dynamo": dynamo, "inductor": inductor, "functorch": functorch, "compiler": compiler}


# Settings that say where things live on this machine, not what is computed. The CUTLASS folders are paths
# resolved when torch is imported (``xpu``'s is the working directory, ``cuda``'s beside torch's files);
# Inductor leaves them out of its own cache key for that reason.
_LOCAL_ONLY: Final = frozenset(
    {
        "inductor.cpp.cxx",
        "dynamo.debug_dir_root",
        "inductor.compile_threads",
        "inductor.cuda.cutlass_dir",
        "inductor.cutlass.cutlass_dir",
        "inductor.xpu.cutlass_dir",
    }
)


_CACHE_KEY_TAG: Final = "compiler.cache_key_tag"


def compiler_settings() -> tuple[dict[str, Any], dict[str, Any]]:
    """(settings that differ from their defaults, every setting), ``section.name → value``.

    ``compiler.cache_key_tag`` is read without the kernel registry's salt (:func:`~inferensics.kernels.cache_salt.
    user_tag`): inside a compile that traced registry ops it holds a digest of that graph's provider decisions, which
    no build outside that compile records; the registry's state is a factor of its own (``kernel_registry``)."""
    import warnings

    from inferensics.kernels.cache_salt import user_tag

    changed: dict[str, Any] = {}
    everything: dict[str, Any] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # reading a deprecated entry warns; deprecated entries are skipped
        for section, module in _config_modules().items():
            entries: Mapping[str, Any] = getattr(module, "_config", {})
            for name, entry in sorted(entries.items()):
                key = f"{section}.{name}"
                if key in _LOCAL_ONLY or getattr(entry, "deprecated", False) or getattr(entry, "alias", None):
                    continue
                try:
                    value = _render(getattr(module, name))
                    default = _render(entry.default)
                    if key == _CACHE_KEY_TAG and isinstance(value, str):
                        value = user_tag(value)
                except Exception:
                    continue
                everything[key] = value
                if value != default:
                    changed[key] = value
    return changed, everything


def inductor_option_names() -> list[str]:
    """Every option name Inductor takes in ``config_patches`` (``trace.provenance_tracking_level``)."""
    import torch._inductor.config as inductor

    return sorted(getattr(inductor, "_config", {}))


def unknown_inductor_options(options: Iterable[str]) -> list[str]:
    """The names in ``options`` that are not Inductor options (a compile with one fails deep inside Inductor)."""
    known = set(inductor_option_names())
    return [k for k in options if k not in known] if known else []  # no table to check against: let torch say


def apply_settings(settings: Mapping[str, Any]) -> list[str]:
    """Set recorded ``section.name`` settings whose value is plain JSON; returns the keys it could not set."""
    modules = _config_modules()
    skipped: list[str] = []
    for key, value in settings.items():
        section, _, name = key.partition(".")
        module = modules.get(section)
        if module is None or (isinstance(value, str) and value.startswith(("pass:", "<"))) or ":" in str(value):
            skipped.append(key)
            continue
        try:
            setattr(module, name, tuple(value) if isinstance(getattr(module, name), tuple) else value)
        except Exception:
            skipped.append(key)
    return skipped


def dynamic_patches(dynamic: bool | None) -> dict[str, Any]:
    """Settings ``torch.compile(dynamic=...)`` sets while it compiles (``make_set_enable_dynamic`` in
    ``torch._dynamo.eval_frame``): read inside a compile they differ from a build's, which reads them outside."""
    if dynamic is None:
        return {}
    if dynamic:
        return {"dynamo.assume_static_by_default": False}
    return {"dynamo.automatic_dynamic_shapes": False, "dynamo.assume_static_by_default": True}


def mode_options(mode: str | None) -> dict[str, Any]:
    """Inductor options a ``torch.compile`` mode stands for."""
    if mode in (None, "default"):
        return {}
    from torch._inductor import list_mode_options

    return dict(list_mode_options(mode))


def compile_fx(gm: torch.fx.GraphModule, example_inputs: list[Any], config_patches: Mapping[str, Any]) -> Any:
    """Inductor's ``compile_fx`` with ``config_patches``."""
    from torch._inductor.compile_fx import compile_fx as _compile_fx

    return _compile_fx(gm, example_inputs, config_patches=dict(config_patches) or None)


def graph_input_sources(gm: torch.fx.GraphModule) -> list[str]:
    """Where Dynamo took each placeholder of its graph from (``L['x']``, ``L['self']._modules['lin']._parameters
    ['weight']``), ``""`` where it recorded none (a graph not traced by Dynamo)."""
    out: list[str] = []
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        name = getattr(getattr(node.meta.get("grapharg"), "source", None), "name", None)
        name = name() if callable(name) else name  # a method on older torch, a property now
        out.append(name if isinstance(name, str) else "")
    return out


def current_compile_id() -> str:
    """Dynamo's compile id of the frame being compiled (``"0/1"``), or ``""``."""
    try:
        from torch._guards import CompileContext

        return str(CompileContext.current_compile_id() or "")
    except Exception:
        return ""


def compiling_code(max_depth: int = 64) -> Any:
    """The code object Dynamo is compiling on this thread (a local of its ``_compile``), or ``None``."""
    import sys

    try:
        frame: Any = sys._getframe(1)
        for _ in range(max_depth):
            if frame is None:
                return None
            if frame.f_code.co_name == "_compile" and frame.f_code.co_filename.endswith("convert_frame.py"):
                return frame.f_locals.get("code")
            frame = frame.f_back
    except Exception:
        return None
    return None


@contextlib.contextmanager
def temporary_cache_dir(directory: str) -> Iterator[None]:
    """Point Inductor's (and Triton's) caches at ``directory`` for the block (``TORCHINDUCTOR_CACHE_DIR``, which
    Inductor reads on each use; set here rather than through its private helper, which moved between
    releases), with the in-memory code caches emptied so every kernel the block compiles lands there."""
    import os

    from torch._inductor import codecache

    # Kernels this process loaded before are kept in memory by source hash and would not be written into the
    # new directory (a build after an earlier compile of the same model carried no CPU kernels).
    for cache in (codecache.CppCodeCache, codecache.CppPythonBindingsCodeCache, codecache.CppWrapperCodeCache):
        cache.cache_clear()
    codecache.PyCodeCache.cache_clear(purge=False)
    saved = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = directory
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = saved


def install_cache_files(source: Path) -> int:
    """Copy files laid out as Inductor's cache (``<2 chars>/<name>``) into the cache in use; returns how many
    were copied (files already there are kept)."""
    import shutil

    from torch._inductor.runtime.cache_dir_utils import cache_dir

    if not source.is_dir():
        return 0
    root = Path(cache_dir())
    copied = 0
    for f in sorted(source.glob("*/*")):
        dst = root / f.parent.name / f.name
        if not dst.exists():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, dst)
            copied += 1
    return copied


def clear_cache_artifact_record() -> None:
    """Forget the cache artifacts recorded so far, so the next save holds only what follows."""
    from torch.compiler._cache import CacheArtifactManager

    CacheArtifactManager.clear()


def save_cache_artifacts() -> bytes:
    """The Mega-Cache blob of every compile-cache artifact recorded since the last clear."""
    saved = torch.compiler.save_cache_artifacts()
    return saved[0] if saved is not None else b""


def load_cache_artifacts(blob: bytes) -> dict[str, list[str]]:
    """Install a Mega-Cache blob into the local caches; returns cache kind → keys."""
    info = torch.compiler.load_cache_artifacts(blob)
    return {str(k): list(v) for k, v in (info.artifacts.items() if info is not None else [])}


def reset_compiler() -> None:
    """Drop Dynamo's compiled frames and Inductor's in-memory caches (a fresh start in this process)."""
    torch._dynamo.reset()
    from torch._inductor import decomposition

    with contextlib.suppress(AttributeError):
        decomposition.fast_random_decomps.cache_clear()


def frames_compiled() -> int:
    """Frames Dynamo has compiled (or tried to) in this process: a call during which it moves compiled."""
    from torch._dynamo.utils import counters

    return int(counters["frames"]["total"])


@contextlib.contextmanager
def recompile_limit_raised(limit: int) -> Iterator[None]:
    """Dynamo keeps up to ``limit`` compiled entries per frame for the block (several policies' compiles of one
    model, alive at once, would otherwise hit its limit and run eagerly)."""
    import torch._dynamo.config as dynamo

    name = "recompile_limit" if hasattr(dynamo, "recompile_limit") else "cache_size_limit"  # its older name
    with dynamo.patch(name, max(limit, int(getattr(dynamo, name)))):
        yield


_FX_PASS_SLOTS: Final = (
    "pre_grad_custom_pass",
    "post_grad_custom_pre_pass",
    "post_grad_custom_post_pass",
    "joint_custom_pre_pass",
    "joint_custom_post_pass",
    "_pre_fusion_custom_pass",
    "_post_fusion_custom_pass",
)
"""Inductor's config slots that hold a user's FX pass (``None`` when empty); those this torch lacks are skipped."""


def fx_pass_slots() -> dict[str, Any]:
    """Each custom FX pass slot this torch's Inductor has, with what it holds now (``None``: empty)."""
    import torch._inductor.config as inductor

    return {slot: getattr(inductor, slot) for slot in _FX_PASS_SLOTS if hasattr(inductor, slot)}


@dataclass(frozen=True)
class LastingInstall:
    """A decomposition or FX pass installed for the process (a bundle load's), and what its place held before."""

    kind: str
    """``decomposition`` or ``fx_pass``."""
    target: str
    """The op (``aten.gelu.default``) or the slot (``post_grad_custom_post_pass``)."""
    installed: Any
    previous: Any
    """What the table entry or slot held before (``None``: nothing)."""


_LASTING: list[LastingInstall] = []


def remember_lasting(record: LastingInstall) -> None:
    """Note an install made for the process (:func:`lasting_installs` lists them, oldest first)."""
    _LASTING.append(record)


def forget_lasting() -> None:
    """Forget every install made for the process (a new load replaced them)."""
    _LASTING.clear()


def lasting_installs() -> list[LastingInstall]:
    """The installs made for the process, oldest first; those made inside a :func:`compiler_state_restored`
    block are forgotten with the state it puts back."""
    return list(_LASTING)


@contextlib.contextmanager
def compiler_state_restored(fx_slots: Iterable[str] = ()) -> Iterator[None]:
    """On exit, Inductor's decomposition table, its custom FX pass slots (every one of :data:`_FX_PASS_SLOTS`
    and the named ``fx_slots``) and the compile cache's key tag are as they were on entry, and the frames compiled
    meanwhile are dropped: customisations installed inside (a bundle build's) reach neither a later build in this
    process nor its caller's compiles, and what was set aside inside comes back."""
    import torch._inductor.config as inductor
    import torch.compiler.config as compiler
    from torch._inductor import decomposition

    table = dict(decomposition.decompositions)
    slots = {s: getattr(inductor, s) for s in {*fx_pass_slots(), *fx_slots} if hasattr(inductor, s)}
    tag = compiler.cache_key_tag
    lasting = list(_LASTING)
    try:
        yield
    finally:
        _LASTING[:] = lasting
        decomposition.decompositions.clear()
        decomposition.decompositions.update(table)
        for slot, value in slots.items():
            setattr(inductor, slot, value)
        compiler.cache_key_tag = tag
        reset_compiler()


def install_decomposition(op_name: str, fn: Callable[..., Any]) -> None:
    """Register ``fn`` as Inductor's decomposition of ``op_name`` (``aten.silu.default``) in this process."""
    from torch._inductor import decomposition

    decomposition.decompositions[resolve_op(op_name)] = fn
    with contextlib.suppress(AttributeError):
        decomposition.fast_random_decomps.cache_clear()


_SALT_SEP: Final = "|inferensics:"


def salt_cache_key(salt: str) -> None:
    """Set ``torch.compiler.config.cache_key_tag`` to the user's own tag plus ``salt`` (replacing an earlier salt)."""
    import torch.compiler.config as compiler

    base = str(compiler.cache_key_tag or "").split(_SALT_SEP)[0]
    compiler.cache_key_tag = f"{base}{_SALT_SEP}{salt}"


def unsalt_cache_key() -> None:
    """Put ``torch.compiler.config.cache_key_tag`` back to the user's own tag (no salt of :func:`salt_cache_key`)."""
    import torch.compiler.config as compiler

    tag = str(compiler.cache_key_tag or "")
    if _SALT_SEP in tag:
        compiler.cache_key_tag = tag.split(_SALT_SEP, maxsplit=1)[0]


def cache_key_salted() -> bool:
    """Whether ``torch.compiler.config.cache_key_tag`` carries a salt of :func:`salt_cache_key`."""
    import torch.compiler.config as compiler

    return _SALT_SEP in str(compiler.cache_key_tag or "")


def restore_decomposition(op_name: str, fn: Callable[..., Any] | None) -> None:
    """Make ``fn`` Inductor's decomposition of ``op_name`` again, or drop the entry when ``fn`` is ``None``."""
    from torch._inductor import decomposition

    op = resolve_op(op_name)
    if fn is None:
        decomposition.decompositions.pop(op, None)
    else:
        decomposition.decompositions[op] = fn
    with contextlib.suppress(AttributeError):
        decomposition.fast_random_decomps.cache_clear()


def foreign_decompositions() -> dict[str, Callable[..., Any]]:
    """The entries of Inductor's decomposition table whose function is not PyTorch's own (a partial's function
    counts), by op name: what serving code or a bundle installed in this process."""
    import functools

    out: dict[str, Callable[..., Any]] = {}
    for op, fn in inductor_decompositions().items():
        inner: Any = fn
        while isinstance(inner, functools.partial):
            inner = inner.func
        module = str(getattr(inner, "__module__", "") or "")
        if module != "torch" and not module.startswith("torch."):
            out[op] = fn
    return out


def inductor_decompositions() -> dict[str, Callable[..., Any]]:
    """Inductor's decomposition table by op name (``aten.silu.default``)."""
    from torch._inductor import decomposition

    return {str(op): fn for op, fn in decomposition.decompositions.items()}


def resolve_op(op_name: str) -> Any:
    """``aten.silu.default`` → ``torch.ops.aten.silu.default``."""
    target: Any = torch.ops
    for part in op_name.split("."):
        target = getattr(target, part)
    return target


def install_fx_pass(slot: str, fn: Any) -> None:
    """Set Inductor's custom FX pass ``slot`` (``post_grad_custom_post_pass`` …) to ``fn``."""
    import torch._inductor.config as inductor

    setattr(inductor, slot, fn)


# The slots whose pass Inductor's FX-graph cache must key by its uuid(): while one holds a pass that is not a
# CustomGraphPass with a truthy uuid(), every graph is compiled past the cache (``_check_custom_passes`` in
# torch/_inductor/codecache.py), so no cache entry, no key and nothing for a Mega-Cache blob. A pre-grad pass
# without a uuid() runs before the lookup instead (its "early" timing) and is covered by the cache-key salt.
_KEYED_FX_PASS_SLOTS: Final = frozenset(
    {"post_grad_custom_pre_pass", "post_grad_custom_post_pass", "joint_custom_pre_pass", "joint_custom_post_pass"}
)


def fx_pass_cache_bypass(slot: str, fn: Any) -> str | None:
    """Why Inductor bypasses its FX-graph cache for every graph compiled with ``fn`` in the FX pass ``slot``
    (``has no uuid()``, ``has a uuid() that returns None`` …), or ``None`` when the cache keys it."""
    from torch._inductor.custom_graph_pass import CustomGraphPass

    if slot not in _KEYED_FX_PASS_SLOTS:
        return None
    if not isinstance(fn, CustomGraphPass):
        return "has no uuid()"
    try:
        uuid = fn.uuid()
    except Exception as exc:  # the user's code: Inductor would raise it from inside the compile
        return f"has a uuid() that raises {type(exc).__name__}"
    return None if uuid else f"has a uuid() that returns {uuid!r}"


def is_custom_graph_pass(obj: Any) -> bool:
    """Whether ``obj`` is an instance of Inductor's ``CustomGraphPass`` (a pass object whose class is its code)."""
    from torch._inductor.custom_graph_pass import CustomGraphPass

    return isinstance(obj, CustomGraphPass)


def aoti_compile_and_package(exported: Any, path: str) -> str:
    """Compile a ``torch.export`` program with AOTInductor into a ``.pt2`` package at ``path`` (an artifact a
    bundle can carry: ``BuildSpec(aoti_package=...)``); returns the package's path."""
    from torch._inductor import aoti_compile_and_package as compile_package

    return str(compile_package(exported, package_path=path))


def aoti_load_package(path: str) -> Any:
    """Load an AOTInductor ``.pt2`` package."""
    from torch._inductor import aoti_load_package as load

    return load(path)


@dataclass
class CompileCapture:
    """Trace artifacts collected for compiles on this thread: cache keys, output code, guards, breaks."""

    events: list[tuple[str, dict[str, Any], str]] = field(default_factory=list)
    """(artifact or event name, metadata, payload)."""


class _TraceCapture(logging.Handler):
    """A ``torch.__trace`` handler that keeps the artifacts the bundle needs, per thread."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.local = threading.local()

    def emit(self, record: logging.LogRecord) -> None:
        capture: CompileCapture | None = getattr(self.local, "capture", None)
        if capture is None:
            return
        try:
            md: dict[str, Any] = getattr(record, "metadata", {}) or {}
            payload = getattr(record, "payload", None) or ""
            if "artifact" in md:
                name = str(md["artifact"].get("name", ""))
                if name not in _CAPTURED:
                    return
            elif "inductor_output_code" in md:
                name = "inductor_output_code"
            elif "dynamo_cpp_guards_str" in md:
                name = "dynamo_cpp_guards_str"
            else:
                return
            capture.events.append((name, md, payload))
        except Exception:  # never fail a compile
            return


_HANDLER = _TraceCapture()
_HANDLER_LOCK = threading.Lock()
_HANDLER_USERS = [0]


@contextlib.contextmanager
def capture_compiles() -> Iterator[CompileCapture]:
    """Collect this thread's compile artifacts for the block (trace handler attached while anyone uses it)."""
    logger = logging.getLogger(TRACE_LOGGER)
    with _HANDLER_LOCK:
        if _HANDLER_USERS[0] == 0:
            logger.addHandler(_HANDLER)
            logger.setLevel(logging.DEBUG)
        _HANDLER_USERS[0] += 1
    previous = getattr(_HANDLER.local, "capture", None)
    capture = CompileCapture()
    _HANDLER.local.capture = capture
    try:
        yield capture
    finally:
        _HANDLER.local.capture = previous
        with _HANDLER_LOCK:
            _HANDLER_USERS[0] -= 1
            if _HANDLER_USERS[0] == 0:
                logger.removeHandler(_HANDLER)


_VALUE_GUARD = re.compile(r"\bEQUALS_MATCH: L\['([^'\]]+)'\] == (.+)$")


def value_guards(guard_tree: str) -> list[tuple[str, str, str]]:
    """The guards of a Dynamo guard tree (``dynamo_cpp_guards_str``) that pin a frame local to one value: ``(local,
    value, the source it came from)`` each, such as ``("___stack1", "0.66", "k = int(x[0, 0].item() > 0) + 1  #
    m.py:8 in forward")``. A Python number the frame receives (an argument, or a ``.item()`` result carried over a
    graph break) is specialised on its value: a call with another value fails the guard and recompiles."""
    found = []
    for line in guard_tree.splitlines():
        m = _VALUE_GUARD.search(line)
        if m is None:
            continue
        value, _, where = m.group(2).partition("  # ")
        found.append((m.group(1), value.strip(), where.strip()))
    return found


def payload_json(payload: str) -> dict[str, Any]:
    """A JSON artifact payload as a dict (empty when it is not JSON)."""
    try:
        value = json.loads(payload)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def frame_compile_id(md: Mapping[str, Any]) -> str:
    """``"frame/compile"`` of a trace record's metadata."""
    return f"{md.get('frame_id', '')}/{md.get('frame_compile_id', '')}"


def inline_wrapper_code() -> Any:
    """The code of Dynamo's inline wrapper, the frame it compiles for a torch-owned module or function
    (``nn.Sequential``, ``nn.Embedding``): one code object for all of them; ``None`` where this torch has none."""
    try:
        from torch._dynamo import external_utils

        return external_utils.wrap_inline(inline_wrapper_code).__code__
    except Exception:
        return None
