"""Which of our Triton kernels Inductor could not embed in a generated module (run as a module, without
``TRITON_INTERPRET``: the interpreter's kernels do not carry the globals Inductor copies).

Under ``torch.compile`` a ``triton_op`` kernel's source, with every helper and global constant it reaches,
is written into the generated module inside a ``'''``-quoted string (``async_compile.triton(name, '''...''')``)
and loaded from there. Each kernel's closure is built as Inductor builds it and checked to come out of that
string unchanged and to compile; prints the names of the ones that do not, as JSON.
"""

from __future__ import annotations

import ast
import importlib
import json
import pkgutil

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
            compile(embedded, name, "exec")
        except SyntaxError as exc:
            bad[name] = f"SyntaxError: {exc.msg} (line {exc.lineno})"
            continue
        if embedded != source:
            bad[name] = "changed by the string it is embedded in (an escape in a global constant's repr)"
    return bad


if __name__ == "__main__":
    print(json.dumps({"kernels": len(kernels()), "unembeddable": unembeddable()}))
