"""The fused-kernel plant fires in both code generators: C++ (CPU) and Triton (GPU).

Last session's plant patched ``SIMDScheduling.define_kernel``, which ``TritonScheduling`` overrides, so on the
H200 the fault never reached a Triton kernel. Here Inductor generates Triton code for a CPU graph
(``cpu_backend="triton"``); this machine has no Triton backend to compile it, so the test stops at the
kernel source, which is what the plant changes (Triton's backend hash is stubbed: it needs a driver).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from tests.replay.faults import Spread, corrupt_fused_constant

pytestmark = pytest.mark.usefixtures("no_compile_caches")


def _kernel_sources(monkeypatch: pytest.MonkeyPatch, backend: str) -> list[str]:
    import torch._inductor.config as cfg
    from torch._inductor.codegen import cpp, triton

    seen: list[str] = []
    original_triton, original_cpp = triton.TritonScheduling.define_kernel, cpp.CppScheduling.define_kernel

    def spy_triton(self: Any, src: str, *args: Any, **kwargs: Any) -> Any:
        seen.append(src)
        return original_triton(self, src, *args, **kwargs)  # type: ignore[no-untyped-call]

    def spy_cpp(self: Any, src: str, *args: Any, **kwargs: Any) -> Any:
        seen.append(src)
        return original_cpp(self, src, *args, **kwargs)  # type: ignore[no-untyped-call]

    monkeypatch.setattr(triton.TritonScheduling, "define_kernel", spy_triton)
    monkeypatch.setattr(cpp.CppScheduling, "define_kernel", spy_cpp)
    if backend == "triton":
        import torch.utils._triton as triton_utils

        monkeypatch.setattr(triton_utils, "triton_hash_with_backend", lambda: "0" * 64)
    torch._dynamo.reset()
    with cfg.patch(cpu_backend=backend), corrupt_fused_constant("0.375", "0.875"):
        try:
            torch.compile(Spread().eval())(torch.randn(4, 8))
        except Exception:
            if backend != "triton":  # no Triton backend for CPU here: the kernel source is all there is
                raise
    torch._dynamo.reset()
    return seen


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["cpp", "triton"])
def test_fused_constant_plant_reaches_the_kernel_source(monkeypatch: pytest.MonkeyPatch, backend: str) -> None:
    pytest.importorskip("triton")
    sources = _kernel_sources(monkeypatch, backend)
    assert sources, f"Inductor generated no {backend} kernel"
    assert any("0.875" in s for s in sources), f"the plant did not reach the fused {backend} kernel"
    assert not any("0.375" in s for s in sources)
