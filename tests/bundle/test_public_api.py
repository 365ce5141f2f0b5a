"""The bundle part's public API is pinned, and its build/verify/load path imports nothing heavy."""

from __future__ import annotations

import subprocess
import sys

from inferensics import bundle

FORBIDDEN = ("chdb", "clickhouse_connect", "polars", "streamlit", "opentelemetry", "pyarrow", "httpx")


def test_all_is_pinned() -> None:
    assert sorted(bundle.__all__) == sorted([
        "FACTOR_GROUPS", "PROVENANCE_OPTIONS", "BuildResult", "BuildSpec", "BundleCache", "BundleError", "BundleMatch",
        "BundleMissRefusedError", "BundleSession", "BundleStates", "CachedBuild", "CompileBudget", "Customisation",
        "FactorChange", "GraphRecord", "Keyring", "LoadedBundle", "Manifest", "Progress", "ShapeDistribution",
        "SigningKey", "UnqualifiedShape", "VerifiedBundle", "build", "describe_customisation", "diff", "generate_key",
        "load", "load_signing_key", "pack", "read_manifest", "render_diff", "unpack", "verify",
    ])  # fmt: skip
    assert all(hasattr(bundle, name) for name in bundle.__all__)


def test_gpu_host_path_imports_only_torch_triton_pydantic_cryptography() -> None:
    code = (
        "import sys; import inferensics.bundle as b; from inferensics.bundle import advice, report; "
        f"print([m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r}])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]"
