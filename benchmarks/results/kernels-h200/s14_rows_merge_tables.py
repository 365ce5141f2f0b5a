"""Merge a sweep log's TABLE_ROW lines (row ops only) into a launch-table file; other ops' entries are kept.

python3 s14_rows_merge_tables.py SWEEP_LOG TABLES_JSON COPY_JSON
"""

import json
import sys
import time
from pathlib import Path
from typing import Any

log, table_path, out_path = (Path(a) for a in sys.argv[1:4])
rows: dict[str, list[Any]] = {}
for line in log.read_text().splitlines():
    if line.startswith("TABLE_ROW "):
        name, row = json.loads(line[len("TABLE_ROW ") :])
        rows.setdefault(name, []).append(row)
data = json.loads(table_path.read_text())
for name, new in rows.items():
    keys = {tuple(n[:3]) for n in new}  # (residual?/dtype/heads, columns, rows bucket)
    data[name] = [r for r in data.get(name, []) if tuple(r[:3]) not in keys] + new
data["rows_measured"] = {
    "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    "how": "row-op entries, session 14: benchmarks/results/kernels-h200/s14_rows_sweep.py 15 (add+RMSNorm at 8192; "
    "add+RMSNorm at 512 and SiLU-mul from session 13, the other row-op entries from session 12), merged by "
    "s14_rows_merge_tables.py",
}
for path in (table_path, out_path):
    path.write_text(json.dumps(data, indent=1))
print("merged", {k: len(v) for k, v in rows.items()})
