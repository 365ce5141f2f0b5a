"""Which of our Triton kernels Inductor could not embed in a generated module (run as a module, without
``TRITON_INTERPRET``: the interpreter's kernels do not carry the globals Inductor copies).

Under ``torch.compile`` a ``triton_op`` kernel's source, with every helper and global constant it reaches,
is written into the generated module inside a ``'''``-quoted string (``async_compile.triton(name, '''...''')``)
and loaded from there. Each kernel's closure is built as Inductor builds it and checked to come out of that
string unchanged and to load (run from a file, below the imports Inductor writes); prints the names of the
ones that do not, as JSON.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import pkgutil
import tempfile
from pathlib import Path

from torch._inductor.codegen.triton import TritonKernel
from torch._inductor.codegen.wrapper import user_defined_triton_kernel_transitive_closure_source_code
from triton.runtime.jit import JITFunction

from inferensics.kernels import _triton


def kernels() -> dict[str, JITFunction]:
    """Every ``@triton.jit`` function defined in ``inferensics.kernels._triton``, by qualified name."""
    found: dict[str, JITFunction] = {}
    for info in pkgutil.iter_modules(_triton.__path__):
        module = importlib.import_module(f"{_triton.__name__}.{info.name}")
        for name, obj in vars(module).items():
            if isinstance(obj, JITFunction) and obj.__module__ == module.__name__:
                found[f"{info.name}.{name}"] = obj
    return found


def unembeddable() -> dict[str, str]:
    """Kernel name → what goes wrong, for each kernel whose closure does not survive Inductor's embedding."""
    bad: dict[str, str] = {}
    for name, kernel in kernels().items():
        source = user_defined_triton_kernel_transitive_closure_source_code(kernel)
        try:
            embedded = ast.literal_eval("'''" + source + "'''")
            module = TritonKernel.gen_common_triton_imports() + embedded
            compile(module, name, "exec")
        except SyntaxError as exc:
            bad[name] = f"SyntaxError: {exc.msg} (line {exc.lineno})"
            continue
        if embedded != source:
            bad[name] = "changed by the string it is embedded in (an escape in a global constant's repr)"
            continue
        try:
            _load(module, name)
        except Exception as exc:
            bad[name] = f"loading it raised {type(exc).__name__}: {exc}"
    return bad


def _load(source: str, name: str) -> None:
    """Run ``source`` as a module from a file (Triton's ``@jit`` reads its functions' source from there), as
    Inductor loads the module it generated."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"embedded_{name.replace('.', '_')}.py"
        path.write_text(source)
        spec = importlib.util.spec_from_file_location(path.stem, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {path}")
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


if __name__ == "__main__":
    print(json.dumps({"kernels": len(kernels()), "unembeddable": unembeddable()}))
