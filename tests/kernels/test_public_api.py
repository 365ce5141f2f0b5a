"""The kernels package's public API is pinned, and it imports nothing outside torch, triton and schema."""

from __future__ import annotations

import os
import subprocess
import sys

from inferensics import kernels


def test_all_is_pinned() -> None:
    assert sorted(kernels.__all__) == sorted(
        [
            "REFERENCE", "CallContext", "Decision", "DecisionLog", "EvidenceApplication", "EvidenceError", "Provider",
            "QualifyOptions", "QualifyResult", "Registry", "Requirements", "Rule", "Samples", "SemanticOp",
            "ToleranceSpec", "Verdict", "apply_evidence", "canonical_digest", "compare", "environment",
            "fused_add_rms_norm", "paged_decode_attention", "qualify", "registry", "registry_state", "rms_norm",
            "rotary_embedding", "signature", "silu_mul",
        ]
    )  # fmt: skip


def test_imports_only_torch_triton_and_schema() -> None:
    # A bare GPU host has torch, triton and pydantic: importing and qualifying must not pull in the store,
    # the dashboard or OpenTelemetry (checked in a fresh interpreter, after using the Triton providers).
    code = (
        "import sys; from inferensics import kernels; import torch\n"
        "kernels.qualify(kernels.registry(), kernels.QualifyOptions(ops=('silu_mul',), trials=2, warmup=1,"
        " iters=1, accuracy_seeds=1, apply=False))\n"
        "heavy = ('chdb', 'clickhouse_connect', 'polars', 'streamlit', 'opentelemetry')\n"
        "ours = ('inferensics.collector', 'inferensics.analytics', 'inferensics.dashboard')\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in heavy or m.startswith(ours)]\n"
        "print(bad)"
    )
    env = {**os.environ, "TRITON_INTERPRET": "1", "INFERENSICS_KERNELS_INTERPRET": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_the_folder_imported_by_its_bare_name_says_what_to_do() -> None:
    # A script run from a checkout's root has the root on sys.path, so `import kernels` (transformers >= 5.25
    # imports Hugging Face's `kernels`) finds this folder: one line says why and what to do, instead of a
    # missing name deep inside transformers.
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONSAFEPATH"}  # a caller's setting would hide it
    proc = subprocess.run(
        [sys.executable, "-c", "import kernels"],
        cwd=root, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: ")
    assert "kernels/ folder" in last
    assert "run the script from another directory, or with `python -P`" in last
