"""The end-to-end demo: real compiled models, real incidents, the whole pipeline.

``inferensics demo`` (:mod:`inferensics.demo.runner`) starts the collector service and the dashboard, then
three serving workers (:mod:`inferensics.demo.worker`) that replay a seeded workload
(:mod:`inferensics.demo.workload`) through the host SDK, with injected incidents
(:mod:`inferensics.demo.incidents`) on two model families (:mod:`inferensics.demo.models`).

The package root imports nothing heavy, so a worker process pays only for what it uses.
"""

from inferensics.demo.workload import POLICY_TEXT, RequestSpec, Workload, build_workload

__all__ = ["POLICY_TEXT", "RequestSpec", "Workload", "build_workload"]
