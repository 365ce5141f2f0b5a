"""The README's "Retention" statements, run as printed on a real embedded store, and the cluster one checked against
the cluster schema the store renders.

What it got wrong: on a cluster the README said to add ``ON CLUSTER <cluster>`` to ``ALTER TABLE
inferensics.requests MODIFY TTL ...``. On a cluster ``inferensics.requests`` is the ``Distributed`` table, which
refuses a TTL (``Engine Distributed doesn't support TTL clause``); the rows, and the TTL, are in the shard table
``inferensics.requests_local``.
"""

from __future__ import annotations

import re
from pathlib import Path

from inferensics.schema.store import Store

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
CLUSTER_SQL = (ROOT / "schema" / "sql" / "cluster.sql").read_text(encoding="utf-8")
DEPLOY_README = (ROOT / "deploy" / "README.md").read_text(encoding="utf-8")


def _section() -> str:
    return README.split("\n### Retention\n", 1)[1].split("\n## ", 1)[0]


def _statements() -> list[str]:
    """The section's ``ALTER TABLE ... MODIFY TTL ...`` statements, each as one line."""
    code = re.findall(r"`([^`]*)`", _section().replace("\n", " "))
    return [" ".join(c.split()) for c in code if c.startswith("ALTER TABLE") and "MODIFY TTL" in c]


def _engine(table: str) -> str:
    """The ENGINE of ``inferensics.<table>`` in the committed cluster schema."""
    create = CLUSTER_SQL.split(f"CREATE TABLE IF NOT EXISTS inferensics.{table} ON CLUSTER", 1)[1].split(
        "\nCREATE ", 1
    )[0]
    (engine,) = re.findall(r"^ENGINE = (\w+)", create, flags=re.MULTILINE)
    return str(engine)


def test_the_statements_for_one_store_run_as_printed(store: Store) -> None:
    single = [s for s in _statements() if "ON CLUSTER" not in s]
    assert len(single) == 2, single  # an event table's and a TTL added to blob_contents
    for statement in single:
        table = statement.split()[2].removeprefix("inferensics.")
        store.client.command(statement.replace("inferensics.", f"{store.database}.", 1))
        created = store.client.command(f"SHOW CREATE TABLE {store.database}.{table}")
        days = statement.rsplit("INTERVAL ", 1)[1].split()[0]
        assert f"TTL toDateTime(ts) + toIntervalDay({days})" in str(created), created


def test_the_cluster_statement_alters_the_shard_table_which_takes_a_ttl() -> None:
    (statement,) = [s for s in _statements() if "ON CLUSTER" in s]
    table = statement.split()[2].removeprefix("inferensics.")
    engine = _engine(table)
    assert engine.startswith("Replicated"), engine
    assert engine.endswith("MergeTree"), engine  # the family that takes a TTL
    assert _engine(table.removesuffix("_local")) == "Distributed"  # what the plain name is on a cluster


def test_the_section_points_to_the_embedded_stores_way_and_it_is_there() -> None:
    (title,) = re.findall(r'`deploy/README\.md` \("([^"]+)"\)', " ".join(_section().split()))
    assert f"\n## {title}\n" in DEPLOY_README
