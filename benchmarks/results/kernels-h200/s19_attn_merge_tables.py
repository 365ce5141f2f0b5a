"""Put the session-19 sweep's won paged rows (cells where a persistent grid beat the incumbent in every round of stage
3, by >= 0.5 % in the median) into the device copy's h200_tables.json, per key; the other keys keep the committed
rows."""

import json
import sys
from pathlib import Path

sweep = json.loads(Path(sys.argv[1]).read_text())
target = Path(__file__).with_name("inferensics") / "kernels" / "_triton" / "h200_tables.json"
tables = json.loads(target.read_text())
rows = {r[0]: r for r in tables["paged"]}
new = {r[0]: r for r in sweep.get("paged", [])}
rows.update(new)
tables["paged"] = list(rows.values())
tables["paged_measured"] += f" | device copy, session 19 sweep ({sweep['when']}): {sorted(new)}"
target.write_text(json.dumps(tables, indent=1))
print("merged", len(new), "swept paged rows:", list(new.values()))
