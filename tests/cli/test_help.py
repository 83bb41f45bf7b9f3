"""One command line: `aksgpu --version`, every command described in plain text (no reStructuredText ``markup``), the
same metavars for the same flags everywhere, the collect subcommands with help of their own, the commands in the
order people use them, and each help the same whether the whole command line is built or only what it shows."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

import pytest

from aks_gpu import __version__
from aks_gpu.cli import COMMANDS, build_parser, main

Words = tuple[str, ...]
# Every command and subcommand, as a user types it.
COMMAND_LINES = [
    ["plan"],
    ["preflight"],
    ["local"],
    ["local", "up"],
    ["local", "status"],
    ["local", "down"],
    ["validate"],
    ["validate", "collect"],
    ["audit"],
    ["audit", "collect"],
    ["advise"],
    ["admission"],
    ["admission", "check"],
    ["rules"],
    ["smi"],
    ["smi", "parse"],
    ["smi", "health"],
    ["smi", "diag"],
    ["catalog"],
    ["schema"],
]
# A flag's metavar, the same on every command that takes it.
METAVARS = {
    "--stack": "NAME",
    "--config-file": "FILE",
    "--project-dir": "DIR",
    "--kubeconfig": "FILE",
    "--context": "NAME",
    "--snapshot": "DIR",
    "--html": "FILE",
}


def help_of(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--help"])
    assert exit_info.value.code == 0
    return capsys.readouterr().out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"aksgpu {__version__}\n"


@pytest.mark.parametrize("argv", COMMAND_LINES, ids=" ".join)
def test_every_command_is_described_in_plain_text_with_its_own_help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    text = help_of(argv, capsys)
    assert text.startswith(f"usage: aksgpu {' '.join(argv)} ")
    usage, _, rest = text.partition("\n\n")
    description = rest.split("\n\n")[0]
    assert description and not description.startswith(("options:", "positional arguments:")), f"{argv}: no description"
    assert "``" not in text
    for flag, metavar in METAVARS.items():
        for shown in re.findall(rf"{flag} (\S+)", usage):
            assert shown.strip("[]") == metavar, f"aksgpu {' '.join(argv)}: {flag} {shown}"


def test_the_commands_are_listed_in_the_order_people_use_them(capsys: pytest.CaptureFixture[str]) -> None:
    assert tuple(COMMANDS) == (
        "plan", "preflight", "local", "validate", "audit", "advise", "admission", "rules", "smi", "catalog", "schema"
    )
    text = help_of([], capsys)
    listed = re.findall(r"^    (\w+)", text, flags=re.MULTILINE)
    assert listed == list(COMMANDS)
    assert "``" not in text


def test_validate_collect_is_a_subcommand_and_validate_still_needs_a_stack(capsys: pytest.CaptureFixture[str]) -> None:
    text = help_of(["validate", "collect"], capsys)
    assert "--out DIR" in text and "--snapshot" not in text.split("options:")[1] and "--verbose" not in text
    assert main(["validate"]) == 2
    assert "--stack NAME is required" in capsys.readouterr().err
    assert main(["validate", "collect", "--stack", "prod"]) == 2
    assert "collect needs --out DIR" in capsys.readouterr().err


def parsers(parser: argparse.ArgumentParser, words: Words = ()) -> Iterator[tuple[Words, argparse.ArgumentParser]]:
    """Each parser of the command line, with the words that reach it."""
    yield words, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, command in action.choices.items():
                yield from parsers(command, (*words, name))


def test_each_help_is_the_whole_command_lines(capsys: pytest.CaptureFixture[str]) -> None:
    # `aksgpu --help` builds no command's parser (the list comes from aks_gpu.cli.COMMANDS) and `aksgpu smi parse --help`
    # only smi's: each shows what the command line with every command's parser shows, byte for byte.
    whole = dict(parsers(build_parser()))
    assert set(whole) == {(), *(tuple(argv) for argv in COMMAND_LINES)}
    for words, parser in whole.items():
        assert help_of(list(words), capsys) == parser.format_help(), f"aksgpu {' '.join(words)} --help"
    # With no command, or a mistyped one: the usage on stderr and exit 2, as the whole command line says them.
    assert main([]) == 2
    assert capsys.readouterr().err == whole[()].format_help()
    with pytest.raises(SystemExit) as exit_info:
        main(["palns"])
    assert exit_info.value.code == 2
    with pytest.raises(SystemExit):
        build_parser().parse_args(["palns"])
    mistyped, expected = capsys.readouterr().err.split("usage:")[1:]
    assert mistyped == expected and "invalid choice: 'palns' (choose from 'plan', 'preflight'," in expected
