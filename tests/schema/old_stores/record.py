"""Write the DDL of a store created by an older release (run with that release's code first on the path; README.md
beside this file has the command that wrote each ``vN.sql``).

The release creates an empty embedded store (``Store.open(...).migrate()``, what its ``inferensics init`` does); the
file is every table's then every view's ``create_table_query`` as the engine reports it, and the release's rows of
``schema_migrations``, with the database written ``__DB__``. Only the standard library and the release's own
``Store`` are used, so the script runs against any release that has ``inferensics.schema.store.Store``.
"""

from __future__ import annotations

import sys

from inferensics.schema.store import Store

DB = "inferensics"
PLACEHOLDER = "__DB__"


def main(commit: str, path: str) -> None:
    store = Store.open(f"chdb://{path}")
    version = store.migrate()
    rows = store.client.query(
        "SELECT name, engine, create_table_query FROM system.tables WHERE database = {db:String} "
        "ORDER BY engine = 'MaterializedView', name",
        parameters={"db": DB},
    ).result_rows
    applied = store.client.query(
        f"SELECT version, name, checksum FROM {DB}.schema_migrations FINAL ORDER BY version"
    ).result_rows
    print(f"-- A store created by release {commit} (schema version {version}): record.py's output, do not edit.")
    for _name, _engine, query in rows:
        assert PLACEHOLDER not in query
        print(query.replace(f" {DB}.", f" {PLACEHOLDER}.") + ";\n")
    for v, name, checksum in applied:
        quoted = str(name).replace("\\", "\\\\").replace("'", "\\'")
        print(
            f"INSERT INTO {PLACEHOLDER}.schema_migrations (version, name, checksum, applied_at) "
            f"VALUES ({v}, '{quoted}', '{checksum}', '2026-12-01 00:00:00');\n"
        )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
