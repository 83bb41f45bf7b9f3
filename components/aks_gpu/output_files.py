"""Writing a file a user names (``rules --out``, ``audit --html``, a snapshot's files): the previous file stays whole
until the new one is, and a failed write (a full disk, a file-size limit, Ctrl-C) leaves no cut or empty file.

``write_atomically`` writes beside the destination and renames over it, as the plan does with its folder. What is not
a regular file is written in place: a named pipe that something reads (``--out >(promtool check rules /dev/stdin)``)
or a device (``/dev/stdout``) cannot be renamed over, and it holds nothing to lose. A symlink is followed: the file
it points at is replaced, the link stays.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from pathlib import Path


def write_atomically(path: Path | str, data: bytes) -> Path:
    """Write ``data`` to ``path``: into a new file beside it, flushed to disk, then renamed into place. ``OSError``
    saying why not (the destination then is as it was)."""
    target = Path(os.path.realpath(path))
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "is a folder, not a file")
        _write_in_place(target, data)
        return Path(path)
    fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".new", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())  # a full disk is found here, before the old file is replaced
        # mkstemp makes the file private; keep the mode the file had, or the one open() would have given.
        os.chmod(temporary, stat.S_IMODE(mode) if mode is not None else 0o666 & ~_umask())
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return Path(path)


def _write_in_place(target: Path, data: bytes) -> None:
    """A named pipe or a device. Opened without blocking first: a named pipe nobody reads is refused at once (ENXIO)
    instead of a wait for a reader for ever."""
    try:
        fd = os.open(target, os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:
        if error.errno == errno.ENXIO:
            raise OSError(error.errno, "a named pipe that nobody reads") from None
        raise
    os.set_blocking(fd, True)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def _umask() -> int:
    # Read by setting it: there is no other way.
    current = os.umask(0o022)
    os.umask(current)
    return current
