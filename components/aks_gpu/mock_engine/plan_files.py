"""Writing a plan's files: ``resources.json`` and ``manifests/`` put in place of the output folder atomically, and the
leftovers of a plan killed mid-write cleared."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any

import yaml

from aks_gpu.mock_engine.records import PlanResult

PLAN_FILE = "resources.json"
# The last plan that passed (exit 0), kept beside a plan that did not: the next plan in the folder is told its changes
# against it, so a refused replacement is told again on every run until it is accepted or undone.
ACCEPTED_FILE = "resources.accepted.json"
# What the engine will do with each change against the deployed state (aks_gpu.mock_engine.changes).
CHANGES_FILE = "changes.json"
MANIFEST_DIR = "manifests"
_SWAP_ATTEMPTS = 20


class PlanWriteError(Exception):
    """The output folder cannot take a plan (a file stands there, it holds other files, it is not writable)."""


def write_plan(
    result: PlanResult, out_dir: Path, changes: dict[str, Any] | None = None, accepted: str | None = None
) -> list[Path]:
    """Write ``resources.json``, ``changes.json`` (when given), ``resources.accepted.json`` (``accepted``, the text of
    the last plan that passed, when given) and ``manifests/`` as ``out_dir``; returns the files written,
    ``resources.json`` first.

    Atomic: the plan is written into a fresh folder beside ``out_dir``, which then takes ``out_dir``'s place by
    renames, so whoever reads the folder (a second plan, a diff, checkov), even while another plan is being
    written into it, finds one whole plan, never a half-written file or two plans' manifests mixed. The whole
    folder is replaced, so one that holds anything else is refused rather than emptied."""
    out_dir = Path(out_dir)
    _check_out_dir(out_dir)
    manifests = result.manifests()
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        _drop_strays(out_dir)
        staging = Path(tempfile.mkdtemp(prefix=_stray_prefix(out_dir), suffix=".new", dir=out_dir.parent))
    except OSError as error:
        raise PlanWriteError(f"cannot write the plan to {out_dir}: {error.strerror or error}") from None
    try:
        (staging / PLAN_FILE).write_text(json.dumps(result.to_json(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
        if changes is not None:
            (staging / CHANGES_FILE).write_text(json.dumps(changes, indent=2) + "\n", encoding="utf-8")
        if accepted is not None:
            (staging / ACCEPTED_FILE).write_text(accepted, encoding="utf-8")
        (staging / MANIFEST_DIR).mkdir()
        for file_name, manifest in manifests.items():
            text = yaml.safe_dump(manifest, sort_keys=True, default_flow_style=False)
            (staging / MANIFEST_DIR / file_name).write_text(text, encoding="utf-8")
        # mkdtemp makes the folder private (0700); a plan folder is as readable as any other output.
        staging.chmod(0o755)
        # Through a symlinked --out, the folder it points at is replaced, and the link stays.
        _swap_in(staging, out_dir.resolve())
    except OSError as error:
        raise PlanWriteError(f"cannot write the plan to {out_dir}: {error.strerror or error}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    written = [out_dir / PLAN_FILE, *([out_dir / CHANGES_FILE] if changes is not None else [])]
    written += [out_dir / ACCEPTED_FILE] if accepted is not None else []
    return [*written, *(out_dir / MANIFEST_DIR / name for name in manifests)]


def _check_out_dir(out_dir: Path) -> None:
    # One stat, then one listing, each allowed to find the folder gone: another plan being swapped into the same
    # folder moves it aside for an instant, which is not a file standing in the way.
    try:
        is_folder = stat.S_ISDIR(out_dir.stat().st_mode)
    except FileNotFoundError:
        return
    except OSError as error:  # a symlink loop, a path through a file (ENOTDIR), no permission
        raise PlanWriteError(f"cannot write the plan to {out_dir}: {error.strerror or error}") from None
    if not is_folder:
        raise PlanWriteError(f"{out_dir} is a file, not a folder: give --out a folder (it is created if missing)")
    try:
        entries = [entry.name for entry in out_dir.iterdir()]
    except FileNotFoundError:
        return
    except OSError as error:
        raise PlanWriteError(f"cannot write the plan to {out_dir}: {error.strerror or error}") from None
    foreign = sorted(name for name in entries if name not in (PLAN_FILE, CHANGES_FILE, ACCEPTED_FILE, MANIFEST_DIR))
    if foreign:
        listed = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise PlanWriteError(
            f"{out_dir} holds files that are not part of a plan ({listed}); a plan replaces the whole folder,"
            " so give --out an empty folder, a new one, or a previous plan's"
        )


def _stray_prefix(out_dir: Path, pid: int | None = None) -> str:
    """The name start of the folders a plan writes beside ``out_dir`` (``.NAME.<pid>.<random>.new`` and ``.old``): the
    writer's process id in it tells a later plan whether the folder is a leftover of one that was killed."""
    return f".{out_dir.name}.{os.getpid() if pid is None else pid}."


def _drop_strays(out_dir: Path) -> None:
    """Remove the ``.new``/``.old`` folders beside ``out_dir`` that a plan killed mid-write left (its process is gone);
    a running plan's own are left alone."""
    pattern = re.compile(rf"^\.{re.escape(out_dir.name)}\.(\d+)\.[^.]+\.(?:new|old)$")
    try:
        siblings = list(out_dir.parent.iterdir())
    except OSError:
        return
    for sibling in siblings:
        match = pattern.fullmatch(sibling.name)
        if match is None or _process_alive(int(match.group(1))):
            continue
        shutil.rmtree(sibling, ignore_errors=True)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True  # another user's: not ours to judge
    return True


def _swap_in(staging: Path, out_dir: Path) -> None:
    """Put ``staging`` where ``out_dir`` is: move the old folder aside, rename the new one in, drop the old.
    Another writer may do the same at the same moment; whoever loses a rename tries again. Between the two renames
    the folder is absent for an instant (docs/cli.md says so); interrupted there (Ctrl-C), the old plan is put back."""
    for _ in range(_SWAP_ATTEMPTS):
        old: Path | None = None
        if out_dir.exists():
            old = Path(tempfile.mkdtemp(prefix=_stray_prefix(out_dir), suffix=".old", dir=out_dir.parent))
            try:
                os.replace(out_dir, old)  # over the empty folder just made: atomic
            except FileNotFoundError:
                old.rmdir()  # another writer moved it first
                old = None
                continue
        swapped = False
        try:
            os.rename(staging, out_dir)
            swapped = True
        except OSError as error:
            if error.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
            continue  # another writer's plan went in between: move that one aside next time round
        finally:
            if old is not None and not swapped and not out_dir.exists():
                with contextlib.suppress(OSError):
                    os.rename(old, out_dir)  # not replaced (an error, Ctrl-C): the previous plan stays
            if old is not None and old.exists():
                shutil.rmtree(old, ignore_errors=True)
        return
    raise PlanWriteError(f"cannot write the plan to {out_dir}: other processes kept replacing it")
