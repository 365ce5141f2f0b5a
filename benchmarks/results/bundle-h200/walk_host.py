"""A fresh serving process on the GPU: load the bundle through the SDK, serve, print what the registry did (JSON)."""

from __future__ import annotations

import json
import sys

import torch
from walk_models import mlp_inputs, registry_mlp

from inferensics import kernels
from inferensics.collector.host import NullExporter, instrument

bundle, keyring = sys.argv[1], sys.argv[2]
model = registry_mlp().cuda().eval()
tracker = instrument(exporter=NullExporter(), host="h200", model="registry-mlp")
compiled = tracker.compile(model, bundle=bundle, keyring=keyring)
outs = []
for i in range(12):
    (x,) = mlp_inputs((8,))
    with tracker.request(f"r{i}") as req, torch.inference_mode():
        y = compiled(x.cuda())
        req.set_output(y)
    outs.append(y.float())
with torch.inference_mode():
    ref = model(mlp_inputs((8,))[0].cuda()).float()
tracker.flush()
stats = tracker.stats()
log = kernels.registry().log
print(
    json.dumps(
        {
            "max_abs_vs_eager": float((outs[-1] - ref).abs().max()),
            "compiled": [d.to_json() for d in kernels.registry().decisions() if d.compiled],
            "applications": [a.to_json() for a in log.applications()],
            "log": log.stats(),
            "sdk": {
                k: v
                for k, v in stats.items()
                if k.startswith(("kernel_evidence", "bundle_", "requests", "fingerprint"))
            },
        },
        default=str,
    )
)
tracker.shutdown()
