"""What every ``aksgpu`` command shares: finding the project, loading a stack, reporting config errors."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aks_gpu import __version__
from aks_gpu.config.problems import ConfigError, Problem, clipped
from aks_gpu.naming import CONFIG_NAMESPACE, PACKAGE_NAME

if TYPE_CHECKING:
    from rich.console import Console

    from aks_gpu.resolved.model import PlatformModel
    from aks_gpu.resolved.stack import ValidatedStack

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
# An exception nobody caught: a bug, reported as one (aks_gpu.internal_error), never a traceback.
EXIT_INTERNAL = 3
# A cell or line of user or cluster text is cut past this many characters.
MAX_TEXT_SHOWN = 2000


def aksgpu_version() -> str:
    """The version of the installed aks-gpu, as its package metadata records it (what pip and a bug report name);
    a source tree that was never installed has no metadata, and says the version its source declares."""
    # Imported here: importlib.metadata takes more than half as long to import as the whole command line
    # (`python -X importtime`), and only --version and the audit's HTML page need it.
    import importlib.metadata

    try:
        return importlib.metadata.version(PACKAGE_NAME)
    except importlib.metadata.PackageNotFoundError:
        return __version__


def _console(stderr: bool) -> Console:
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # rich exits 1 here ("a check failed", for a passing run piped into `head`): the command line's boundary
            # turns this into 141, what a shell reports for a program stopped by SIGPIPE.
            self.quiet = True
            raise BrokenPipeError(32, "the reader of the output has gone")

    stream = sys.stderr if stderr else sys.stdout
    # Piped output (CI logs, files) gets a wide page instead of rich's 80-column fallback, unless COLUMNS names a
    # width (rich reads it); emoji=False: ":key:" in a stack key or a cluster message is text, not an emoji code.
    columns = os.environ.get("COLUMNS", "")
    width = None if stream.isatty() or columns.strip().isdigit() else 160
    return _Console(stderr=stderr, highlight=False, emoji=False, width=width)


def __getattr__(name: str) -> Any:
    # ``out`` and ``err``, the rich consoles, made on first use: a command that prints plain text (``smi parse`` prints
    # JSON) never loads rich.
    if name in ("out", "err"):
        console = _console(stderr=name == "err")
        globals()[name] = console
        return console
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@contextmanager
def interrupts_end_at_once() -> Iterator[None]:
    """While inside, Ctrl-C ends the process at once with 130 and one line, no traceback: for code that cannot take a
    KeyboardInterrupt cleanly and writes nothing meanwhile (the Pulumi program under the mock engine runs on asyncio,
    which prints the interrupt as a task's traceback, or swallows it and goes on to write the plan)."""
    import os
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        yield
        return

    def end(signum: int, frame: object) -> None:
        try:
            os.write(2, b"interrupted\n")
        finally:
            os._exit(130)

    previous = signal.signal(signal.SIGINT, end)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


# The project file, as the Pulumi CLI finds it (config/loader.py PROJECT_FILES, not imported: it loads the models).
_PROJECT_FILES = ("Pulumi.yaml", "Pulumi.yml")


def find_project_dir(start: Path | None = None) -> Path | None:
    """The folder holding the project file: the working folder or one above it, as the Pulumi CLI finds it; None
    outside any project. Never the folder this package was loaded from: installed with pip that is site-packages,
    and a checkout the package runs from is not the project of the folder the command was run in."""
    here = resolved(start or Path.cwd())
    for folder in (here, *here.parents):
        if any((folder / name).is_file() for name in _PROJECT_FILES):
            return folder
    return None


def project_dir_for(args: argparse.Namespace) -> Path:
    """``--project-dir``, else the project found from the working folder. Outside any project, with ``--config-file``
    the working folder (the stack file names itself); without, a ``ConfigError`` (exit 2) saying which flag to give."""
    if args.project_dir is not None:
        return resolved(args.project_dir)
    found = find_project_dir()
    if found is not None:
        return found
    if getattr(args, "config_file", None) is not None:
        return resolved(Path.cwd())
    stack = getattr(args, "stack", None)
    raise ConfigError(
        f"Pulumi.{stack}.yaml" if stack else "Pulumi.yaml",
        [
            Problem(
                "(file)",
                f"no Pulumi project here: neither {resolved(Path.cwd())} nor a folder above it holds "
                "Pulumi.yaml; run in the project, or give --project-dir DIR (the folder with Pulumi.yaml) or "
                "--config-file FILE (a stack file)",
            )
        ],
    )


def add_stack_arguments(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    """``--stack NAME``, ``--config-file FILE``, ``--project-dir DIR``: the same names and metavars on every command."""
    parser.add_argument(
        "--stack",
        metavar="NAME",
        required=required,
        help="stack name: reads Pulumi.<NAME>.yaml from the project's stackConfigDir (stacks/ here)",
    )
    parser.add_argument(
        "--config-file", type=Path, metavar="FILE", help="read this stack file instead of the stack's Pulumi.<NAME>.yaml"
    )
    parser.add_argument(
        "--project-dir",
        type=Path,
        metavar="DIR",
        help="the folder with Pulumi.yaml (default: the working folder or one above it)",
    )


@dataclass(frozen=True)
class LoadedStack:
    project_dir: Path
    stack: str
    path: Path
    raw: dict[str, Any]
    validated: ValidatedStack


def load_stack(args: argparse.Namespace) -> LoadedStack:
    """Load and validate the stack named on the command line; raises ``ConfigError``."""
    # Imported here: the config models are the one heavy import a stack command needs, and only those pay for it.
    from aks_gpu.config.loader import load_stack_file, stack_file_path
    from aks_gpu.resolved.stack import validate_stack

    project_dir = project_dir_for(args)
    path: Path = args.config_file or stack_file_path(project_dir, args.stack)
    label = display_path(path)
    if args.config_file is None and not path.exists():
        raise ConfigError(label, [Problem("(file)", no_such_stack(args.stack, path.parent))])
    raw = load_stack_file(path)
    try:
        validated = validate_stack(raw, label)
    except ConfigError as exc:
        raise ConfigError(label, exc.problems) from None
    given = validated.config.cluster.kubeconfig
    if given is not None and not os.access(Path(given).expanduser(), os.R_OK):
        # The given-cluster mode's one file (the program checks it too, under pulumi up).
        raise ConfigError(label, [Problem("aks-gpu:cluster.kubeconfig", f"cannot read {given}")])
    return LoadedStack(project_dir=project_dir, stack=args.stack, path=path, raw=raw, validated=validated)


def load_rendered_sections(path: Path) -> PlatformModel:
    """The model of the in-cluster sections a stack rendered for its diagnostic schedule (``aksgpu validate
    --sections-file``: ``aks_gpu.validation.schedule.schedule_sections_file``), checked by the same models and
    rules as the component that takes them; raises ``ConfigError``. No cluster key is in it: the Azure cluster is not
    the schedule's to judge."""
    from aks_gpu.config.loader import load_stack_file
    from aks_gpu.resolved.stack import validate_sections

    label = display_path(path)
    prefix = f"{CONFIG_NAMESPACE}:"
    raw = load_stack_file(path)
    sections = {key.removeprefix(prefix): value for key, value in raw.items() if key.startswith(prefix)}
    try:
        return validate_sections(sections, label)
    except ConfigError as exc:
        raise ConfigError(label, exc.problems) from None


def no_such_stack(stack: str, folder: Path) -> str:
    """What to say for ``--stack NAME`` with no ``Pulumi.NAME.yaml``: the stacks that do exist there, so a typo or a
    stack never created is told from the other at once."""
    try:
        names = sorted(
            file.name.removeprefix("Pulumi.").removesuffix(".yaml")
            for file in folder.glob("Pulumi.*.yaml")
            if file.is_file()
        )
    except OSError:
        names = []
    where = display_path(folder)
    if not names:
        return (
            f"no such stack file: no stack {stack!r} (Pulumi.{stack}.yaml), and {where} holds no Pulumi.<stack>.yaml; "
            "name a stack file with --config-file FILE"
        )
    return (
        f"no such stack file: no stack {stack!r} (Pulumi.{stack}.yaml) in {where}; the stacks there are "
        f"{', '.join(names)} (--stack NAME), or name a stack file with --config-file FILE"
    )


def resolved(path: Path) -> Path:
    """``path`` made absolute, symlinks followed where they can be: a symlink loop (which ``Path.resolve`` raises
    on) stays as written, and reading it then fails with a message naming it."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # RuntimeError: Python before 3.13 reports a symlink loop so
        return path.absolute()


def display_path(path: Path) -> str:
    """``path`` relative to the current folder where it is under it, else as given."""
    try:
        return str(resolved(path).relative_to(resolved(Path.cwd())))
    except ValueError:
        return str(path)


def write_text_file(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` (UTF-8) beside it and rename it into place (``aks_gpu.output_files``): a full disk
    or Ctrl-C leaves the previous file whole, never a cut one. A named pipe is written only when something reads it
    (``--out >(promtool ...)``): one nobody reads is refused at once (ENXIO). ``OSError`` saying why not."""
    from aks_gpu.output_files import write_atomically

    write_atomically(path, text.encode("utf-8"))


def escape(text: str) -> str:
    """``text`` as a literal in rich markup."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


def safe(text: object, limit: int = MAX_TEXT_SHOWN) -> str:
    """User or cluster text ready for a rich markup string: ``[bold red]DEV[/bold red]`` shows as written (and
    ``[/x]`` cannot break the line), control characters (newlines, terminal escapes) are shown escaped, and
    the text is cut past ``limit`` characters."""
    return escape(clipped(str(text), limit))


def report_config_error(exc: ConfigError) -> int:
    """One line per problem (stack file, key path, value, what is allowed); exit code 2."""
    errors = exc.errors
    __getattr__("err").print(
        f"[bold red]invalid stack config[/]: {len(errors)} error(s) in {safe(exc.source)}; nothing was planned or created"
    )
    for problem in exc.problems:
        style = "red" if problem.severity == "error" else "yellow"
        __getattr__("err").print(f"  [{style}]{problem.severity}[/] {escape(problem.render(exc.source))}")
    return EXIT_USAGE


def report_warnings(loaded: LoadedStack, section: str | None = None) -> None:
    """The stack config's warnings on stderr; with ``section`` (``admission``), only those on that key of the
    ``aks-gpu`` namespace and below it: a command that reads one section does not repeat the others' warnings."""
    for warning in loaded.validated.warnings:
        if section is not None and not in_section(warning.path, section):
            continue
        __getattr__("err").print(f"[yellow]warning[/] {escape(warning.render(loaded.validated.source))}")


def in_section(path: str, section: str) -> bool:
    """``aks-gpu:admission.gpuNamespaces`` is in section ``admission``; ``aks-gpu:monitoring...`` is not."""
    key = f"{CONFIG_NAMESPACE}:{section}"
    return path == key or path.startswith((f"{key}.", f"{key}["))
