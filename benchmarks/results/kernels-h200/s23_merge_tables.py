"""Put the session-23 sweep's paged rows (the fastest plan per key in stage 2, where the incumbent ran in the same
rounds) into the device copy's h200_tables.json; keys the sweep did not visit keep the committed rows."""

import json
import sys
from pathlib import Path

sweep = json.loads(Path(sys.argv[1]).read_text())
target = Path(__file__).with_name("inferensics") / "kernels" / "_triton" / "h200_tables.json"
tables = json.loads(target.read_text())
rows = {r[0]: r for r in tables["paged"]}
new = {r[0]: r for r in sweep.get("paged", [])}
changed = {k: r for k, r in new.items() if rows.get(k) != r}
rows.update(new)
tables["paged"] = list(rows.values())
tables["paged_measured"] += f" | device copy, session 23 sweep ({sweep.get('when', '')}): {sorted(changed)}"
target.write_text(json.dumps(tables, indent=1))
print("merged", len(changed), "changed paged rows:", list(changed.values()))
