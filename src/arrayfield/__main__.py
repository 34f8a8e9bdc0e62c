"""The `arrayfield` command, also run as `python -m arrayfield`.

Subcommands:

- `migrate PATH...`: rewrite equinox Module classes to `af.ArrayModule` (see
  `arrayfield migrate --help`, which says where the migration guide is).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from arrayfield import __version__
from arrayfield.migrate import _cli as migrate_cli


def main(argv: Sequence[str] | None = None) -> int:
    """Parse `argv` (default: the command line), run the subcommand and return
    its exit status."""
    parser = argparse.ArgumentParser(
        prog="arrayfield",
        description="Command-line tools of arrayfield.",
        epilog="Run `arrayfield COMMAND --help` for a command's options.",
    )
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {__version__}"
    )
    subcommands = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND"
    )
    migrate_cli.add_parser(subcommands)
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        # argparse leaves an unknown option to the top-level parser, whose usage
        # says nothing about the subcommand's options: let the subcommand complain.
        subcommands.choices[args.command].error(
            f"unrecognized arguments: {' '.join(unknown)}"
        )
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
