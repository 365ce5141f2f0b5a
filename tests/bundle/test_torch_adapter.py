"""The compiler settings a bundle records: what is computed, not where this machine keeps things."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SETTINGS = (
    "import json; from inferensics.bundle import torch_adapter; print(json.dumps(torch_adapter.compiler_settings()[1]))"
)


def _settings_from(cwd: Path) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-P", "-c", SETTINGS], cwd=cwd, capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    settings: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return settings


def test_every_setting_is_the_same_from_any_working_directory(tmp_path: Path) -> None:
    """``inferensics demo`` run from another directory rebuilt both release bundles (1 to 2 minutes): the
    bundle cache's key holds the digest of every setting, and ``inductor.xpu.cutlass_dir`` is the working
    directory torch was imported in."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    here, there = _settings_from(tmp_path / "a"), _settings_from(tmp_path / "b")
    assert {k: (v, there.get(k)) for k, v in here.items() if there.get(k) != v} == {}
    assert len(here) > 100
    assert not [k for k in here if k.endswith("cutlass_dir")]


def test_the_cache_key_tag_keeps_the_users_tag_the_bundles_salt_and_the_kernel_registrys_part() -> None:
    """Two writers share ``cache_key_tag``: the bundle's customisation salt and the kernel registry's policy
    digest (which keeps compiles under another provider policy off each other's cache entries). Each replaces
    only its own part; the user's own tag stays first, and it is the only part a bundle records as a setting."""
    import torch.compiler.config as compiler

    from inferensics import kernels
    from inferensics.bundle import torch_adapter
    from inferensics.kernels import _torch_adapter as kadapter

    op = kernels.registry().op("silu_mul")
    saved_tag, saved_priority = compiler.cache_key_tag, list(op.priority)
    try:
        compiler.cache_key_tag = "mine"  # the user's tag set by hand: our parts are gone until written again
        kadapter.sync_cache_tag()
        base, parts = kadapter.cache_tag_parts(compiler.cache_key_tag)
        assert (base, set(parts)) == ("mine", {kadapter.KERNELS_TAG_PART})
        kernel_part = parts[kadapter.KERNELS_TAG_PART]

        with torch_adapter.compiler_state_restored():
            torch_adapter.salt_cache_key("customisations-0123")
            torch_adapter.salt_cache_key("customisations-4567")  # replaces the bundle's part, not the registry's
            assert kadapter.cache_tag_parts(compiler.cache_key_tag) == (
                "mine",
                {"customisations": "4567", kadapter.KERNELS_TAG_PART: kernel_part},
            )
            # Recorded as a setting without the registry's part (a bundle records the registry's state itself).
            recorded = torch_adapter.compiler_settings()[0]["compiler.cache_key_tag"]
            assert recorded == f"mine{kadapter.CACHE_TAG_SEP}customisations-4567"
            op.set_priority(["reference"])  # the registry's part follows its policy, the bundle's stays
            base, parts = kadapter.cache_tag_parts(compiler.cache_key_tag)
            assert (base, parts["customisations"]) == ("mine", "4567")
            assert parts[kadapter.KERNELS_TAG_PART] != kernel_part
            changed_kernel_part = parts[kadapter.KERNELS_TAG_PART]
        # The whole tag as on entry, but for the registry's part: it says the policy as it is now.
        assert kadapter.cache_tag_parts(compiler.cache_key_tag) == (
            "mine",
            {kadapter.KERNELS_TAG_PART: changed_kernel_part},
        )
        op.set_priority(saved_priority)
        assert compiler.cache_key_tag == f"mine{kadapter.CACHE_TAG_SEP}kernels-{kernel_part}"

        # A bundle's recorded user tag replaces the user's part only.
        assert torch_adapter.apply_settings({"compiler.cache_key_tag": "theirs"}) == []
        assert kadapter.cache_tag_parts(compiler.cache_key_tag) == ("theirs", {kadapter.KERNELS_TAG_PART: kernel_part})
        assert torch_adapter._SALT_SEP == kadapter.CACHE_TAG_SEP
        assert torch_adapter._KERNELS_TAG_PART == kadapter.KERNELS_TAG_PART
    finally:
        op.set_priority(saved_priority)
        compiler.cache_key_tag = saved_tag
        kadapter.sync_cache_tag()
