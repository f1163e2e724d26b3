"""The command reference (docs/commands.md), written from the parsers themselves: every command of
``hetdeploy`` and the deployment package's run.py, each option with its help as --help gives it, so the
reference cannot miss or misstate an option (tests/test_config.py compares the committed file with it).

    python -m hetdeploy.commands.reference > docs/commands.md
"""

from __future__ import annotations

import argparse
import sys

from ..core import board_runtime
from .cli import parser

HEADER = """# Command reference

Written by `python -m hetdeploy.commands.reference > docs/commands.md` from the parsers themselves (the
options are declared once, in `hetdeploy/planning/config.py` `OPTIONS` and the commands' own flags); a test
fails when this file differs from them. `hetdeploy COMMAND --help` prints the same.
"""


def _flags(action: argparse.Action) -> str:
    """How the option is written: ``--flag METAVAR`` (each of its spellings), or a positional's name."""
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    takes = action.nargs != 0
    value = action.metavar or (("{" + ",".join(map(str, action.choices)) + "}") if action.choices else
                               action.dest.upper())
    return ", ".join(f"`{flag} {value}`" if takes else f"`{flag}`" for flag in action.option_strings)


def _help(action: argparse.Action) -> str:
    return " ".join((action.help or "").replace("%%", "%").split())


def _command(name: str, command: argparse.ArgumentParser) -> list[str]:
    lines = [f"## {name}", "", f"`{' '.join(command.format_usage().split()[1:])}`", ""]
    if command.description:
        lines += [" ".join(command.description.split()), ""]
    for group in command._action_groups:
        actions = [a for a in group._group_actions if not isinstance(a, (argparse._HelpAction,
                                                                        argparse._SubParsersAction))]
        if not actions:
            continue
        lines += [f"**{group.title}**", ""]
        lines += [f"- {_flags(a)}: {_help(a)}" for a in actions]
        lines.append("")
    if command.epilog:
        lines += [" ".join(command.epilog.split()), ""]
    return lines


def command_reference() -> str:
    """docs/commands.md: each ``hetdeploy`` command, then run.py."""
    top = parser()
    commands = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    lines = HEADER.split("\n") + _command("hetdeploy", top)
    for name, command in commands.choices.items():
        lines += _command(f"hetdeploy {name}", command)
    lines += _command("run.py (the deployment package, on the board)", board_runtime.parser())
    return "\n".join(lines).rstrip("\n") + "\n"


if __name__ == "__main__":
    sys.stdout.write(command_reference())
