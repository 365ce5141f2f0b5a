"""``python -m inferensics.collector.service [--host H] [--port P] [--dsn DSN] [--config F] [--spool-dir D]``.

``--write-proto DIR`` writes the OTLP ``.proto`` a ClickHouse server needs in its ``format_schema_path``
(:mod:`inferensics.collector.service.otlp_proto`) and exits.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from inferensics.collector.errors import ConfigError
from inferensics.collector.service.config import load_config
from inferensics.collector.service.otlp_proto import write_proto
from inferensics.collector.service.server import ListenError, serve
from inferensics.collector.service.state import StartError


def main(argv: list[str] | None = None) -> int:
    """Parse the few arguments, resolve the configuration and serve."""
    parser = argparse.ArgumentParser(prog="python -m inferensics.collector.service")
    parser.add_argument("--host")
    parser.add_argument("--port", type=int)
    parser.add_argument("--dsn")
    parser.add_argument("--config")
    parser.add_argument("--spool-dir", dest="spool_dir")
    parser.add_argument(
        "--write-proto",
        metavar="DIR",
        help="write the OTLP .proto a ClickHouse server reads (its format_schema_path) into DIR and exit",
    )
    args = parser.parse_args(argv)
    if args.write_proto:
        try:
            print(write_proto(Path(args.write_proto)))
        except OSError as exc:
            print(f"error: cannot write the schema into {args.write_proto}: {exc.strerror}", file=sys.stderr)
            return 2
        return 0
    try:
        config = load_config(
            {"host": args.host, "port": args.port, "dsn": args.dsn, "spool_dir": args.spool_dir},
            config_file=args.config,
        )
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        serve(config)  # binds the address before it opens the store or the spool; refuses a held one
    except (ListenError, StartError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
