"""The `waypost` script and `python -m waypost`: the command line, with a
Ctrl-C that comes while its modules import (about a quarter of a second at
start) ended as any Ctrl-C before the work starts is, exit 130 and no
traceback (it printed one through a dozen import frames: triage27)."""

from __future__ import annotations

import sys


def main() -> None:
    try:
        from waypost.cli import main as command_line
    except KeyboardInterrupt:
        sys.exit(130)
    command_line(prog_name="waypost")
