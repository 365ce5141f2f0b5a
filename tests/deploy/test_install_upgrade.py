"""``deploy/systemd/install.sh`` upgrading a node: the new release is built beside the live one and switched in.

Before, the script pip-installed the new release into ``/opt/inferensics/venv`` itself, under the running
services: a failed install left a half-replaced environment and no way back. The script runs here as it is,
but on a copy whose absolute paths (``/opt/inferensics``, ``/etc/``, ``/var/lib/``) point into a temporary
root, with stand-ins on ``PATH`` for what needs root, systemd or the network: ``systemctl`` (records each
call and where ``venv`` pointed then), ``install`` (drops ``-g``/``-o``), ``python3 -m venv`` (an environment
whose ``pip`` installs a stand-in ``inferensics`` that prints its release, or fails as the test asks).
Every stand-in refuses an absolute path outside the temporary root.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.deploy.layout import DEPLOY, SYSTEMD

ROLLBACK = 'cd /opt/inferensics && ln -sfnT "$(readlink venv.previous)" venv.new && mv -Tf venv.new venv'
"""The rollback deploy/README.md gives (a test below runs it and checks the README still says it)."""

_GUARD = """guard() { for a in "$@"; do case "$a" in /*) case "$a" in "$FAKE_ROOT"/*) ;; *)
  echo "stand-in: $a is outside the test root" >&2; exit 97;; esac;; esac; done; }
"""
_FAKES = {
    "id": "exit 0\n",
    "useradd": "exit 0\n",
    "systemctl": 'echo "$* venv=$(readlink -f "$FAKE_ROOT/opt/inferensics/venv")" >> "$FAKE_LOG"\n'
    '[ "$1" != is-active ] || [ -e "$FAKE_ACTIVE" ]\n',
    "install": _GUARD + 'args=(); while [ $# -gt 0 ]; do case "$1" in -g|-o) shift 2;; *) args+=("$1"); shift;; esac;'
    ' done\nguard "${args[@]}"\nexec /usr/bin/install "${args[@]}"\n',
    "python3": _GUARD + '[ "$1 $2" = "-m venv" ] || exec /usr/bin/python3 "$@"\nguard "$3"\n'
    'mkdir -p "$3/bin" && sed "s|@VENV@|$3|" "$FAKE_PIP_TEMPLATE" > "$3/bin/pip" && chmod +x "$3/bin/pip"\n',
}
_PIP = """#!/bin/bash
venv=@VENV@
echo "$*" >> "$venv/pip.log"
case " $* " in *" .[dashboard] "*) ;; *) exit 0;; esac
if [ "$FAKE_PIP" = fail ]; then
  printf '#!/bin/sh\\nexit 1\\n' > "$venv/bin/inferensics"; chmod +x "$venv/bin/inferensics"
  echo "ERROR: stand-in pip failed halfway through" >&2; exit 1
fi
code=0; [ "$FAKE_PIP" = broken ] && code=1
printf '#!/bin/sh\\necho "inferensics %s"\\nexit %s\\n' "$FAKE_RELEASE" "$code" > "$venv/bin/inferensics"
printf '#!/bin/sh\\nexit 0\\n' > "$venv/bin/python"
chmod +x "$venv/bin/inferensics" "$venv/bin/python"
"""


@dataclass
class Node:
    """A temporary root standing for a VM's ``/`` and the checkout of a release, with stand-ins on PATH."""

    tmp: Path

    def __post_init__(self) -> None:
        (self.root / "etc" / "systemd" / "system").mkdir(parents=True)  # as on any systemd host

    @property
    def root(self) -> Path:
        return self.tmp / "root"

    @property
    def prefix(self) -> Path:
        return self.root / "opt" / "inferensics"

    @property
    def systemctl(self) -> list[str]:
        log = self.tmp / "systemctl.log"
        return log.read_text().splitlines() if log.exists() else []

    def serving(self) -> str:
        """What ``/opt/inferensics/venv/bin/inferensics`` (the units' command) says it is."""
        return subprocess.run(
            [self.prefix / "venv" / "bin" / "inferensics"], capture_output=True, text=True, check=False, timeout=10
        ).stdout.strip()

    def running(self, release: str) -> None:
        """A node a release before this script's layout installed: ``venv`` a directory, the collector active."""
        venv = self.prefix / "venv"
        (venv / "bin").mkdir(parents=True)
        (venv / "bin" / "inferensics").write_text(f'#!/bin/sh\necho "inferensics {release}"\n')
        (venv / "bin" / "inferensics").chmod(0o755)
        (self.tmp / "active").touch()

    def install(self, release: str, pip: str = "ok") -> subprocess.CompletedProcess[str]:
        """``bash deploy/systemd/install.sh`` of a checkout of ``release``; ``pip``: ok, fail or broken."""
        checkout = self.tmp / f"checkout-{release}"
        shutil.rmtree(checkout, ignore_errors=True)
        (checkout / "deploy" / "systemd").mkdir(parents=True)
        for name in ("README.md", "pyproject.toml"):
            shutil.copy(DEPLOY.parent / name, checkout / name)
        for path in SYSTEMD.iterdir():
            text = path.read_text(encoding="utf-8")
            if path.name == "install.sh":
                for absolute in ("/opt/inferensics", "/etc/", "/var/lib/"):
                    text = text.replace(absolute, f"{self.root}{absolute}")
            (checkout / "deploy" / "systemd" / path.name).write_text(text)
        fakes = self.tmp / "bin"
        fakes.mkdir(exist_ok=True)
        for name, body in _FAKES.items():
            (fakes / name).write_text(f"#!/bin/bash\n{body}")
            (fakes / name).chmod(0o755)
        (self.tmp / "pip.template").write_text(_PIP)
        env = {
            "PATH": f"{fakes}:/usr/bin:/bin",
            "FAKE_ROOT": str(self.root),
            "FAKE_LOG": str(self.tmp / "systemctl.log"),
            "FAKE_ACTIVE": str(self.tmp / "active"),
            "FAKE_PIP_TEMPLATE": str(self.tmp / "pip.template"),
            "FAKE_PIP": pip,
            "FAKE_RELEASE": release,
        }
        return subprocess.run(
            ["bash", str(checkout / "deploy" / "systemd" / "install.sh")],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )


@pytest.fixture
def node(tmp_path: Path) -> Node:
    return Node(tmp_path)


def test_a_first_install_builds_the_release_and_starts_nothing(node: Node) -> None:
    done = node.install("1")
    assert done.returncode == 0, done.stderr
    assert node.serving() == "inferensics 1"
    assert "systemctl restart clickhouse-server && systemctl enable --now" in done.stdout
    assert not any(call.startswith("restart") for call in node.systemctl)
    assert (node.root / "etc" / "systemd" / "system" / "inferensics-collector.service").exists()
    assert not (node.prefix / "venv.previous").exists()


def test_a_good_upgrade_switches_then_restarts_and_keeps_the_previous(node: Node) -> None:
    node.running("old")
    done = node.install("new")
    assert done.returncode == 0, done.stderr
    assert node.serving() == "inferensics new"
    venv = node.prefix / "venv"
    assert venv.is_symlink()
    assert venv.resolve().parent == node.prefix
    # the collector restarts after the switch, on the new release
    assert f"restart inferensics-collector.service venv={venv.resolve()}" in node.systemctl
    previous = node.prefix / "venv.previous" / "bin" / "inferensics"
    assert subprocess.run([previous], capture_output=True, text=True, check=True).stdout.strip() == "inferensics old"
    # a second upgrade keeps two releases: the one before becomes the previous, the oldest goes
    assert node.install("newer").returncode == 0
    assert node.serving() == "inferensics newer"
    assert subprocess.run([previous], capture_output=True, text=True, check=True).stdout.strip() == "inferensics new"
    kept = sorted(p.name for p in node.prefix.glob("venv-*"))
    assert len(kept) == 2, kept


@pytest.mark.parametrize("pip", ["fail", "broken"], ids=["pip-fails-midway", "installed-command-fails"])
@pytest.mark.parametrize("layout", ["directory", "symlink"], ids=["venv-from-an-older-script", "venv-from-this-one"])
def test_a_failed_upgrade_leaves_the_old_release_serving_and_says_so(node: Node, pip: str, layout: str) -> None:
    node.running("old")
    if layout == "symlink":
        assert node.install("good").returncode == 0
    live = "inferensics old" if layout == "directory" else "inferensics good"
    before = node.systemctl
    units = sorted((node.root / "etc").rglob("*"))
    releases = sorted(node.prefix.glob("venv*"))
    done = node.install("bad", pip=pip)
    assert done.returncode == 1, done.stdout + done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("install failed"), done.stderr
    assert last.endswith("is untouched and still serving"), last
    assert node.serving() == live
    assert node.systemctl == before  # nothing restarted
    assert sorted((node.root / "etc").rglob("*")) == units  # nor its units or settings replaced
    assert sorted(node.prefix.glob("venv*")) == releases  # the half-built environment is gone
    assert all("inferensics bad" not in p.read_text() for p in node.prefix.rglob("inferensics") if p.is_file())


def test_the_documented_rollback_returns_to_the_previous_release(node: Node) -> None:
    node.running("old")
    assert node.install("new").returncode == 0
    readme = (DEPLOY / "README.md").read_text(encoding="utf-8")
    assert ROLLBACK in readme
    command = ROLLBACK.replace("/opt/inferensics", str(node.prefix))
    subprocess.run(["bash", "-ec", command], check=True, timeout=10)
    assert node.serving() == "inferensics old"
