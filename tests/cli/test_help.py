"""One command line: `aksgpu --version`, every command described in plain text (no reStructuredText ``markup``), the
same metavars for the same flags everywhere, the collect subcommands with help of their own, and the commands in the
order people use them."""

from __future__ import annotations

import re

import pytest

from aks_gpu import __version__
from aks_gpu.cli import COMMANDS, main

# Every command and subcommand, as a user types it.
COMMAND_LINES = [
    ["plan"],
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
    assert COMMANDS == (
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
