"""Maps the top-level folders (schema/, collector/, ...) to the ``inferensics.*`` import namespace."""

from setuptools import find_packages, setup

PARTS = ["schema", "collector", "analytics", "dashboard", "bundle", "replay", "kernels", "demo", "cli"]

packages = [f"inferensics.{p}" for p in find_packages(include=[f"{part}*" for part in PARTS])]
setup(
    packages=packages,
    package_dir={"inferensics": "."},
)
