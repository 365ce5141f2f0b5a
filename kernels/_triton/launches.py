"""Kernel launches, and eager calls replayed from a launch plan per argument signature.

Every Triton launch of the kernel modules goes through :func:`launch` (``wrap_triton(kernel)[grid](...)``: under
``torch.compile`` the launch is traced as before). An eager call of an op's Python body (``DIRECT``, run by
``ops/common.triton_fn`` when nothing observes the op) goes through :class:`EagerPlans`: its first call with a given
argument signature on a CUDA device runs the body once more while recording what it does (the tensors it allocates,
the views it takes, each kernel it launches with its grid and arguments); a body that does nothing else becomes a
plan, which later calls with that signature replay: the same allocations, then each kernel through Inductor's
static CUDA launcher (one C++ call), with the new arguments' addresses. Triton's launch path (binding,
specialisation, its cache) and the body's own Python (the configuration lookup, layout checks) are then not paid
per call; a decode-sized eager call spends most of its host time there.

The signature is what decides every launch the body makes: each tensor's shape, strides, dtype, device and whether
its address is 16-byte aligned (Triton's own specialisation of a pointer), every other argument's value and the
current device. Process-wide settings the body reads (``$INFERENSICS_KERNELS_FIXED_CONFIG``) are read when a
signature is recorded. A plan is kept only when replaying it on the
recording call's arguments gives the body's output bit for bit (checked once; a synchronisation). A body that runs
any other op (a fill, a copy), reads a tensor it was not given or did not allocate, launches with options the static
launcher cannot give (programmatic dependent launch), or a signature met while a CUDA graph is being captured, keeps
the body's own path; :func:`plan_stats` counts plans and refusals, with each op's last refusal reason.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, Final, NamedTuple

import torch
from torch.library import wrap_triton
from triton.runtime.autotuner import Autotuner

from inferensics.kernels import _torch_adapter as adapter

log = logging.getLogger("inferensics.kernels")

PLAN_LIMIT: Final = 256
"""Signatures an op keeps a plan or a refusal for; later new ones run the body (a flood of shapes is not planned)."""

_RECORDING: dict[int, list[tuple[Any, Any, tuple[Any, ...], dict[str, Any]]]] = {}
"""Per recording thread, the launches its body made so far."""


def launch(kernel: Any, grid: Any, *args: Any, **kwargs: Any) -> None:
    """``kernel[grid](*args, **kwargs)`` through ``wrap_triton`` (traced by a compile as a Triton launch), noted when
    this thread is recording a plan."""
    wrap_triton(kernel)[grid](*args, **kwargs)
    if not torch.compiler.is_compiling() and _RECORDING:  # is_compiling first: a compile never guards on the dict
        launches = _RECORDING.get(threading.get_ident())
        if launches is not None:
            launches.append((kernel, grid, args, kwargs))


class _Launch(NamedTuple):
    """One kernel launch of a plan: the launcher, its grid, the launch's values with every constant in place
    (``template``) and the positions the call's addresses go to (``pointers``: position, kind, slot, byte offset)."""

    kernel: adapter.StaticKernel
    grid: tuple[int, int, int]
    template: tuple[Any, ...]
    pointers: tuple[tuple[int, int, int, int], ...]


class _Alloc(NamedTuple):
    size: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device
    contiguous: bool


class _Out(NamedTuple):
    """A returned tensor: allocation ``alloc`` itself (``view`` ``None``) or a view ``(size, stride, offset)`` of it."""

    alloc: int
    view: tuple[tuple[int, ...], tuple[int, ...], int] | None


class Plan:
    """What one signature's body does, replayed: allocations, static launches, the returned tensors."""

    __slots__ = ("allocs", "device", "launches", "outputs", "single")

    def __init__(
        self, device: int, allocs: Sequence[_Alloc], launches: Sequence[_Launch], outputs: Sequence[_Out], single: bool
    ) -> None:
        self.device = device
        self.allocs = tuple(allocs)
        self.launches = tuple(launches)
        self.outputs = tuple(outputs)
        self.single = single

    def run(self, args: Sequence[Any]) -> Any:
        made = [
            torch.empty(a.size, dtype=a.dtype, device=a.device)
            if a.contiguous
            else torch.empty_strided(a.size, a.stride, dtype=a.dtype, device=a.device)
            for a in self.allocs
        ]
        if self.launches:
            stream = adapter.raw_stream(self.device)
            for kernel, grid, template, pointers in self.launches:
                values = list(template)
                for position, kind, slot, offset in pointers:
                    values[position] = (made[slot] if kind else args[slot]).data_ptr() + offset
                kernel.launch(grid, stream, tuple(values))
        outs = tuple(
            made[o.alloc] if o.view is None else made[o.alloc].as_strided(o.view[0], o.view[1], o.view[2])
            for o in self.outputs
        )
        return outs[0] if self.single else outs


class _RefusedError(Exception):
    """The body cannot be replayed from a plan; the message says why."""


_UNSEEN: Final = object()
_SEEN: Final = object()
_STATS: Counter[str] = Counter()
_REASONS: dict[str, str] = {}
_LOADED: dict[tuple[str, int], adapter.StaticKernel] = {}
_LOCK = threading.Lock()


def plan_stats() -> dict[str, Any]:
    """``plans`` built, ``refused`` signatures, ``limit`` (new signatures past :data:`PLAN_LIMIT`), and ``reasons``:
    each op's last refusal."""
    return {**{k: _STATS[k] for k in ("plans", "refused", "limit")}, "reasons": dict(_REASONS)}


def signature(args: Sequence[Any]) -> tuple[Any, ...] | None:
    """The key of a call's plan (see the module docstring); ``None`` for a call no plan serves (a tensor off CUDA, an
    argument of another kind). One flat tuple: this runs on every eager call of a planned op."""
    parts: list[Any] = []
    add = parts.append
    tensors = False
    for a in args:
        if isinstance(a, torch.Tensor):
            if not a.is_cuda:
                return None
            tensors = True
            add(a.shape)
            add(a.stride())
            add(a.dtype)
            add(a.get_device())
            add(not a.data_ptr() & 15)
        elif isinstance(a, float):
            add(float)
            add(a if a == a else "nan")  # noqa: PLR0124 (NaN is not equal to itself)
        elif isinstance(a, bool | int | str) or a is None:
            add(type(a))
            add(a)
        else:
            return None
    if not tensors:
        return None
    add(adapter.current_cuda_device())
    return tuple(parts)


class EagerPlans:
    """An op body whose eager CUDA calls are replayed from a plan per :func:`signature` (see the module docstring)."""

    def __init__(self, body: Callable[..., Any], name: str) -> None:
        self.body = body
        self.name = name
        self.plans: dict[tuple[Any, ...], Plan | object | None] = {}  # a plan; _SEEN (called once); None: refused
        self.__name__ = getattr(body, "__name__", name)

    def __call__(self, *args: Any) -> Any:
        key = signature(args)
        if key is None:
            return self.body(*args)
        plan = self.plans.get(key, _UNSEEN)
        if isinstance(plan, Plan):
            return plan.run(args)
        if plan is None:  # refused
            return self.body(*args)
        if plan is _UNSEEN:
            # The first call of a signature runs the body as it is: it may compile the kernel or run Triton's
            # autotuner (whose benchmark fills and times buffers); the second call records what the body does.
            if len(self.plans) >= PLAN_LIMIT:
                _STATS["limit"] += 1
            else:
                self.plans[key] = _SEEN
            return self.body(*args)
        if adapter.stream_capturing():  # a recording synchronises once: never under CUDA-graph capture
            return self.body(*args)
        return self._record(key, args)

    def _record(self, key: tuple[Any, ...], args: tuple[Any, ...]) -> Any:
        ident = threading.get_ident()
        launches: list[tuple[Any, Any, tuple[Any, ...], dict[str, Any]]] = []
        seen: list[tuple[Any, tuple[Any, ...], Any]] = []
        _RECORDING[ident] = launches
        try:
            with adapter.aten_ops_seen(seen):
                out = self.body(*args)
        finally:
            _RECORDING.pop(ident, None)
        try:
            plan = _build(key[-1], args, seen, launches, out)  # the current device ends the signature
            _check(plan, args, out)
        except _RefusedError as why:
            self._refuse(key, str(why))
        except Exception as exc:  # a torch or Triton this was not written against: the body's path stays
            self._refuse(key, f"{type(exc).__name__}: {exc}")
        else:
            with _LOCK:
                self.plans[key] = plan
                _STATS["plans"] += 1
        return out

    def _refuse(self, key: tuple[Any, ...], reason: str) -> None:
        with _LOCK:
            self.plans[key] = None
            _STATS["refused"] += 1
            first = _REASONS.get(self.name) != reason
            _REASONS[self.name] = reason
        if first:
            log.info(
                "inferensics: eager calls of %s keep Triton's launch path for this signature: %s", self.name, reason
            )


def _build(
    device: int,
    args: tuple[Any, ...],
    seen: list[tuple[Any, tuple[Any, ...], Any]],
    launches: list[tuple[Any, Any, tuple[Any, ...], dict[str, Any]]],
    out: Any,
) -> Plan:
    allocating, views = adapter.allocating_ops(), adapter.view_ops()
    made: list[torch.Tensor] = []
    family: dict[int, int] = {}  # id of an allocation, or of a detach or alias of one -> its index in made
    for func, func_args, result in seen:
        if func in allocating:
            family[id(result)] = len(made)
            made.append(result)
        elif func not in views:
            raise _RefusedError(f"the body runs {func}, which a plan would not")
        elif func in {torch.ops.aten.detach.default, torch.ops.aten.alias.default} and id(func_args[0]) in family:
            family[id(result)] = family[id(func_args[0])]
    allocs = [_Alloc(tuple(t.shape), tuple(t.stride()), t.dtype, t.device, t.is_contiguous()) for t in made]
    locate = _locator(args, made)
    steps = [_step(device, kernel, grid, a, kw, locate=locate) for kernel, grid, a, kw in launches]
    single = isinstance(out, torch.Tensor)
    outputs = []
    for t in (out,) if single else tuple(out):
        if not isinstance(t, torch.Tensor):
            raise _RefusedError("the body returns something other than tensors")
        index = family.get(id(t), family.get(id(t._base)) if t._base is not None else None)
        if index is None or t.dtype != made[index].dtype:
            raise _RefusedError("the body returns a tensor it did not allocate")
        whole = tuple(t.shape) == tuple(made[index].shape) and t.stride() == made[index].stride()
        view = (
            None if whole and not t.storage_offset() else (tuple(t.shape), tuple(t.stride()), int(t.storage_offset()))
        )
        outputs.append(_Out(index, view))
    return Plan(device, allocs, steps, outputs, single)


def _locator(args: tuple[Any, ...], made: list[torch.Tensor]) -> Callable[[torch.Tensor], tuple[int, int, int]]:
    """``locate(tensor) -> (kind, index, byte offset)``: the argument (0) or allocation (1) whose memory holds it."""
    bases = [(0, i, a) for i, a in enumerate(args) if isinstance(a, torch.Tensor)] + [
        (1, j, m) for j, m in enumerate(made)
    ]

    def locate(t: torch.Tensor) -> tuple[int, int, int]:
        for kind, index, base in bases:
            if t is base:
                return kind, index, 0
        ptr, storage = t.data_ptr(), t.untyped_storage().data_ptr()
        if ptr == 0 or storage == 0:
            raise _RefusedError("a launch reads an empty tensor's address")
        owners = [(kind, index, base) for kind, index, base in bases if base.untyped_storage().data_ptr() == storage]
        if not owners:
            raise _RefusedError(
                "a launch reads a tensor the call neither got nor allocated (a cache of the module's own)"
            )
        if len(owners) > 1:  # views of one buffer: another call's arguments need not share it
            raise _RefusedError("a launch reads a view of memory several arguments share")
        kind, index, base = owners[0]
        return kind, index, ptr - base.data_ptr()

    return locate


def _step(
    device: int,
    kernel: Any,
    grid: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    locate: Callable[[torch.Tensor], tuple[int, int, int]],
) -> _Launch:
    if "launch_pdl" in kwargs:
        raise _RefusedError("a launch asks for programmatic dependent launch")
    if isinstance(kernel, Autotuner):
        hooked = getattr(kernel, "user_defined_pre_hook", True) or getattr(kernel, "user_defined_post_hook", False)
        if hooked or kernel.reset_to_zero or kernel.restore_value:
            raise _RefusedError("an autotuned kernel has hooks")
        config = kernel.best_config
        if config.pre_hook is not None:
            raise _RefusedError("an autotuned configuration has a hook")
        kwargs = {**kwargs, **config.all_kwargs()}
        kernel = kernel.fn
    if not hasattr(kernel, "warmup") or not hasattr(kernel, "arg_names"):
        raise _RefusedError(f"a launch of {type(kernel).__name__}, which a plan does not take")
    bound = {**dict(zip(kernel.arg_names, args, strict=False)), **kwargs}
    if callable(grid):
        grid = grid(bound)
    dims = tuple(int(g) for g in grid)
    if not 1 <= len(dims) <= 3:
        raise _RefusedError(f"a grid of {len(dims)} dimensions")
    compiled = kernel.warmup(*args, grid=grid, **kwargs)
    static = _loaded(compiled, device)
    template: list[Any] = []
    pointers = []
    for position, i in enumerate(static.params):
        name = kernel.arg_names[i]
        if name not in bound:
            raise _RefusedError(f"a launch leaves {name} to its default")
        value = bound[name]
        if isinstance(value, torch.Tensor):
            pointers.append((position, *locate(value)))
            template.append(0)
        elif isinstance(value, bool | int | float):
            template.append(value)
        else:
            raise _RefusedError(f"a launch passes {type(value).__name__} as {name}")
    template += [None] * static.scratch  # newer Triton's scratch pointers, which the kernel never reads
    grid3 = (*dims, *(1,) * (3 - len(dims)))
    return _Launch(static, grid3, tuple(template), tuple(pointers))  # type: ignore[arg-type]


def _loaded(compiled: Any, device: int) -> adapter.StaticKernel:
    """The static launcher of a compiled kernel on ``device``, loaded once."""
    key = (str(compiled.hash), device)
    static = _LOADED.get(key)
    if static is None:
        try:
            static = adapter.StaticKernel(compiled, device)
        except NotImplementedError as why:
            raise _RefusedError(f"the static launcher does not take it: {why}") from None
        with _LOCK:
            static = _LOADED.setdefault(key, static)
    return static


def _check(plan: Plan, args: tuple[Any, ...], want: Any) -> None:
    """Replay ``plan`` on the recording call's arguments and compare its output with the body's, bit for bit."""
    got = plan.run(args)
    pairs = [(got, want)] if isinstance(want, torch.Tensor) else list(zip(got, want, strict=True))
    for g, w in pairs:
        if g.shape != w.shape or g.stride() != w.stride() or g.dtype != w.dtype:
            raise _RefusedError("the replayed output's layout differs from the body's")
        if g.numel() and not torch.equal(_bits(g), _bits(w)):
            raise _RefusedError("the replayed output differs from the body's")


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.uint8)
