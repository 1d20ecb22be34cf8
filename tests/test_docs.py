"""The README's CLI reference is generated from click, and every command is documented."""

from __future__ import annotations

from pathlib import Path

from reconciler.cli import cli
from reconciler.cli_reference import END, START, _commands, render

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_cli_reference_matches_click() -> None:
    text = README.read_text(encoding="utf-8")
    section = START + text.split(START, 1)[1].split(END, 1)[0] + END
    assert section == render(), "run: python -m reconciler.cli_reference --write README.md"


def test_every_command_and_option_has_help() -> None:
    for path, command in _commands(cli, "reconcile"):
        assert command.help, f"{path} has no help text"
        for param in command.params:
            if hasattr(param, "help") and param.param_type_name == "option":
                assert param.help, f"{path} {param.opts} has no help text"
