"""The identity factors of a bundle, raw (``bundle diff`` reads them) and grouped.

Groups: ``model`` (factory and arguments, model classes), ``code`` (digest of each source file the model's
classes come from), ``weights`` (digest over the state dict), ``compiler_versions`` (torch with its
source-tree key, triton with its key, Python, CUDA runtime, cuDNN, cuBLAS), ``settings`` (torch.compile
arguments, Dynamo/Inductor/functorch/compiler settings that differ from defaults), ``customisations``,
``compatibility`` (device, compute capability, driver, CPU ISA, runtime ABI) and ``kernel_registry``.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.metadata
import inspect
import platform
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import torch

from inferensics.bundle import torch_adapter
from inferensics.bundle.canonical import digest_json, sha256_hex
from inferensics.bundle.customisations import Customisation
from inferensics.bundle.errors import BundleError


def model_code(model: Any, extra: Iterable[Any] = ()) -> dict[str, str]:
    """``module name → sha256`` of each non-torch source file the model's classes (and ``extra``) come from."""
    classes: set[type] = set()
    modules = model.modules() if isinstance(model, torch.nn.Module) else [model]
    for m in modules:
        for cls in type(m).__mro__:
            classes.add(cls)
    out: dict[str, str] = {}
    for obj in [*classes, *extra]:
        name = getattr(obj, "__module__", None) or ""
        if not name or name.split(".")[0] in {"torch", "builtins", "typing", "abc"}:
            continue
        module = sys.modules.get(name)
        try:
            path = inspect.getsourcefile(module) if module is not None else None
        except TypeError:
            path = None
        if path:
            out[name] = sha256_hex(Path(path).read_bytes())
    return dict(sorted(out.items()))


def weights(model: Any) -> dict[str, Any]:
    """Digest over the state dict (names, dtypes, shapes, bytes in name order), with counts."""
    if not isinstance(model, torch.nn.Module):
        return {"digest": "", "tensors": 0, "parameters": 0, "dtypes": []}
    h = hashlib.sha256()
    state = model.state_dict()
    dtypes: set[str] = set()
    numel = 0
    for name in sorted(state):
        t = state[name].detach().to("cpu").contiguous()
        dtypes.add(str(t.dtype))
        numel += t.numel()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        if t.numel():  # the bytes through ctypes, not numpy: a GPU host's replay may have no numpy
            raw = t.view(-1).view(torch.uint8)
            h.update(ctypes.string_at(raw.data_ptr(), raw.numel()))
    return {"digest": h.hexdigest(), "tensors": len(state), "parameters": numel, "dtypes": sorted(dtypes)}


def _package_version(*names: str) -> str:
    for n in names:
        try:
            return importlib.metadata.version(n)
        except importlib.metadata.PackageNotFoundError:
            continue
    return ""


def compiler_versions() -> dict[str, Any]:
    """torch (and its source-tree key), triton (and its key), Python, CUDA runtime, cuDNN, cuBLAS."""
    try:
        import triton

        triton_version = str(triton.__version__)
    except ImportError:
        triton_version = ""
    cudnn_mod: Any = torch.backends.cudnn
    cudnn = cudnn_mod.version() if cudnn_mod.is_available() else None
    return {
        "torch": torch.__version__,
        "torch_git": str(getattr(torch.version, "git_version", "")),
        "torch_key": torch_adapter.torch_key(),
        "triton": triton_version,
        "triton_key": sha256_hex(torch_adapter.triton_key().encode()) if torch_adapter.triton_key() else "",
        "python": platform.python_version(),
        "cuda_runtime": str(torch.version.cuda or ""),
        "cudnn": str(cudnn or ""),
        "cublas": _package_version("nvidia-cublas-cu13", "nvidia-cublas-cu12", "nvidia-cublas"),
    }


def _driver_version() -> str:
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
    except OSError:
        return ""
    for word in text.split():
        if word[:1].isdigit() and "." in word:
            return word
    return ""


def device_of(device: str) -> torch.device:
    """``device`` (``cpu`` or ``cuda[:N]``) as a device this host has.

    Raises:
        BundleError: ``bad_input`` for another kind of device, ``incompatible`` for a CUDA device this host
            does not have.
    """
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        dev = None
    if dev is None or dev.type not in ("cpu", "cuda"):
        raise BundleError("bad_input", f"--device {device!r}: expected cpu or cuda (cuda:N for one of several GPUs)")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise BundleError("incompatible", f"--device {device} but this machine has no CUDA device: pass --device cpu")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise BundleError(
            "incompatible",
            f"--device {device} but this machine has {torch.cuda.device_count()} CUDA device(s): pass a lower index",
        )
    return dev


def compatibility(device: str) -> dict[str, Any]:
    """The compatibility key of ``device`` (``cpu`` or ``cuda[:N]``) on this host, matched all-or-nothing.

    Raises:
        BundleError: ``device`` is not a device this host has (:func:`device_of`).
    """
    dev = device_of(device)
    if dev.type == "cuda":
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        major, minor = torch.cuda.get_device_capability(index)
        name, capability, driver = torch.cuda.get_device_name(index), f"{major}.{minor}", _driver_version()
    else:
        name, capability, driver = "cpu", "", ""
    return {
        "device_type": dev.type,
        "device_name": name,
        "compute_capability": capability,
        "driver": driver,
        "cpu_isa": torch.backends.cpu.get_cpu_capability(),
        "machine": platform.machine(),
        "runtime_abi": f"{sys.implementation.cache_tag}-cxx11abi{int(torch.compiled_with_cxx11_abi())}",
    }


def settings(compile_args: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """(the settings group, digest of every compiler setting including defaults)."""
    changed, everything = torch_adapter.compiler_settings()
    return {"compile": dict(compile_args), "changed": changed}, digest_json(everything)


def kernel_registry() -> dict[str, Any]:
    """The kernel registry's state and selection policy (``{"state": "none"}`` until the registry exists)."""
    try:
        from inferensics import kernels

        state = getattr(kernels, "registry_state", None)
        if callable(state):
            return dict(state())
    except Exception:
        pass
    return {"state": "none"}


def registry_differences(bundle: Mapping[str, Any], here: Mapping[str, Any], limit: int = 3) -> list[str]:
    """Where this process's kernel registry state (:func:`kernel_registry`) differs from the one a bundle
    recorded, in words (``silu_mul priority: triton > reference in the bundle, reference here``), at most ``limit``
    and then how many more; empty when the digests agree or the bundle recorded no registry."""
    if not bundle.get("digest") or bundle.get("digest") == here.get("digest"):
        return []
    out: list[str] = []
    ops_b, ops_h = dict(bundle.get("ops") or {}), dict(here.get("ops") or {})
    policy_b, policy_h = dict(bundle.get("policy") or {}), dict(here.get("policy") or {})
    for name in sorted(set(ops_b) | set(ops_h) | set(policy_b) | set(policy_h)):
        if name not in ops_b or name not in ops_h:
            out.append(f"op {name} only {'here' if name not in ops_b else 'in the bundle'}")
            continue
        pb, ph = dict(policy_b.get(name) or {}), dict(policy_h.get(name) or {})
        for field_ in _POLICY_FIELDS:
            if pb.get(field_) != ph.get(field_):
                out.append(f"{name} {field_}: {_policy_text(pb.get(field_))} in the bundle, "
                           f"{_policy_text(ph.get(field_))} here")  # fmt: skip
        providers_b = [p.get("name") for p in ops_b[name].get("providers", [])]
        providers_h = [p.get("name") for p in ops_h[name].get("providers", [])]
        if providers_b != providers_h:
            out.append(f"{name} providers: {', '.join(map(str, providers_b))} in the bundle, "
                       f"{', '.join(map(str, providers_h))} here")  # fmt: skip
        elif _definition(ops_b[name]) != _definition(ops_h[name]):
            out.append(f"{name}: its definition (schema, tolerance or a provider's requirements) differs")
    if bundle.get("evidence") != here.get("evidence"):
        out.append(f"kernel evidence applied: {_evidence_text(bundle.get('evidence'))} in the bundle, "
                   f"{_evidence_text(here.get('evidence'))} here")  # fmt: skip
    if not out:
        out.append(f"digest {str(bundle.get('digest'))[:12]} in the bundle, {str(here.get('digest'))[:12]} here")
    more = len(out) - limit
    return out[:limit] + ([f"{more} more"] if more > 0 else [])


def _policy_text(value: Any) -> str:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return " > ".join(value) if value else "(none)"
    if not value:
        return "(none)"
    text = repr(value)
    return text if len(text) <= 60 else text[:59] + "…"


_POLICY_FIELDS = ("priority", "bucket_priority", "refused")


def _definition(op: Mapping[str, Any]) -> dict[str, Any]:
    """An op's description without what its policy decides (the order, refusals, each provider's status)."""
    providers = [{k: v for k, v in p.items() if k != "status"} for p in op.get("providers", [])]
    return {**{k: v for k, v in op.items() if k not in _POLICY_FIELDS}, "providers": providers}


def _evidence_text(value: Any) -> str:
    items = [str(v)[:12] for v in value] if isinstance(value, list) else []
    return ", ".join(items) if items else "none"


def collect(
    model: Any,
    *,
    factory: str,
    factory_args: Mapping[str, Any],
    device: str,
    compile_args: Mapping[str, Any],
    customisations: Iterable[Customisation] = (),
    registry: Mapping[str, Any] | None = None,
    extra_code: Iterable[Any] = (),
) -> tuple[dict[str, Any], dict[str, str]]:
    """Every identity group but ``artifacts`` and ``accepted_shapes``, and extra digests (``settings_all``)."""
    group, settings_all = settings(compile_args)
    classes = (
        sorted({f"{type(m).__module__}.{type(m).__qualname__}" for m in model.modules()})
        if isinstance(model, torch.nn.Module)
        else [f"{getattr(model, '__module__', '?')}.{getattr(model, '__qualname__', type(model).__qualname__)}"]
    )
    if device == "cpu":
        # Inductor's C++ kernels are generated for this many OpenMP threads, and the count is part of the
        # FX-graph-cache key: a host with another count compiles anew (load applies the recorded one).
        group["cpu_threads"] = torch.get_num_threads()
    identity = {
        "model": {"factory": factory, "args": dict(factory_args), "classes": classes},
        "code": model_code(model, extra_code),
        "weights": weights(model),
        "compiler_versions": compiler_versions(),
        "settings": group,
        "customisations": [c.model_dump() for c in customisations],
        "compatibility": compatibility(device),
        "kernel_registry": dict(registry) if registry is not None else kernel_registry(),
    }
    return identity, {"settings_all": settings_all}
