"""Put a sweep's paged rows into this tree's h200_tables.json, per key (device copy only; cells the sweep did not
finish keep the committed rows; the committed file is merged by hand)."""

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
tables["paged_measured"] = f"{sweep['when']} (device copy, session 14 sweep: {sorted(new)})"
target.write_text(json.dumps(tables, indent=1))
print("merged", len(new), "swept paged rows:", list(new.values()))
