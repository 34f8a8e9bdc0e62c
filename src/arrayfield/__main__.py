"""The `arrayfield` command, also run as `python -m arrayfield`.

Subcommands:

- `migrate PATH...`: rewrite equinox Module classes to `af.ArrayModule` (see
  `arrayfield migrate --help` and docs/migration.md).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from arrayfield.migrate import _cli as migrate_cli


def main(argv: Sequence[str] | None = None) -> int:
    """Parse `argv` (default: the command line), run the subcommand and return
    its exit status."""
    parser = argparse.ArgumentParser(
        prog="arrayfield", description="Command-line tools of arrayfield."
    )
    subcommands = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND"
    )
    migrate_cli.add_parser(subcommands)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
