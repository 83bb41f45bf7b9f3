"""Reading a file a user names (a stack file, a snapshot's JSON, a saved plan): never block, never read without
bound, and say in one line what is wrong with it.

A path can name a folder, a named pipe (opening one for reading waits for a writer: forever), a device
(``/dev/zero`` has no end), a socket, or a regular file of any size. The file is opened without blocking and
checked with ``fstat`` on the open descriptor (not ``stat`` then ``open``, so it cannot be swapped in between);
then at most ``limit + 1`` bytes are read, since ``st_size`` is not always the truth (``/proc`` files say 0).
"""

from __future__ import annotations

import codecs
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

_KINDS = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class InputFileError(ValueError):
    """A file we will not or cannot read; the message says why (without the path: callers name the file)."""


def size_text(size: int) -> str:
    """``1 MiB``, ``256 MiB``, ``12,345 bytes``: how limits and sizes read in messages."""
    if size >= 1 << 20 and size % (1 << 20) == 0:
        return f"{size >> 20:,} MiB"
    return f"{size:,} bytes"


def read_bounded(path: Path | str, limit: int, *, follow_symlinks: bool = True) -> bytes:
    """The bytes of the regular file at ``path`` (symlinks followed unless ``follow_symlinks`` is False: then a
    symlink as the last part of the path is refused), at most ``limit``; ``InputFileError`` otherwise, naming the
    limit when it is what was hit."""
    return b"".join(read_chunks(path, limit, follow_symlinks=follow_symlinks))


def read_chunks(path: Path | str, limit: int, *, follow_symlinks: bool = True, size: int = 1 << 20) -> Iterator[bytes]:
    """``read_bounded`` a piece at a time (``size`` bytes or fewer each), for a reader that need not hold the whole
    file: the same checks before the first piece, ``InputFileError`` as soon as more than ``limit`` bytes were read."""
    fd = _open_regular(path, limit, follow_symlinks)
    try:
        with os.fdopen(fd, "rb", buffering=0, closefd=False) as handle:
            read = 0
            while True:
                try:
                    chunk = handle.read(size)
                except OSError as error:
                    raise InputFileError(f"cannot be read: {error.strerror or type(error).__name__}") from None
                if not chunk:
                    return
                read += len(chunk)
                if read > limit:
                    raise InputFileError(f"is over the {size_text(limit)} limit for this file")
                yield chunk
    finally:
        os.close(fd)


def _open_regular(path: Path | str, limit: int, follow_symlinks: bool) -> int:
    """A descriptor of the regular file at ``path``, checked on the open descriptor; ``InputFileError`` otherwise."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise InputFileError("no such file") from None
    except IsADirectoryError:
        raise InputFileError("is a folder, not a file") from None
    except PermissionError:
        raise InputFileError("cannot be read: permission denied") from None
    except OSError as error:
        if not follow_symlinks and error.errno == errno.ELOOP:
            raise InputFileError("is a symlink: not followed") from None
        raise InputFileError(f"cannot be read: {error.strerror or type(error).__name__}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise InputFileError("is a folder, not a file")
        for test, kind in _KINDS:
            if test(info.st_mode):
                raise InputFileError(f"is {kind}, not a regular file: not read")
        if not stat.S_ISREG(info.st_mode):
            raise InputFileError("is not a regular file: not read")
        if info.st_size > limit:
            raise InputFileError(f"is {size_text(info.st_size)}, over the {size_text(limit)} limit for this file")
    except OSError as error:
        os.close(fd)
        raise InputFileError(f"cannot be read: {error.strerror or type(error).__name__}") from None
    except BaseException:
        os.close(fd)
        raise
    return fd


_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)


def decode_utf8(data: bytes) -> str:
    """``data`` as UTF-8 text (a leading byte order mark dropped); ``InputFileError`` saying which encoding it
    seems to be in, or where the first byte that is not UTF-8 stands, otherwise."""
    for bom, name in _BOMS:
        if data.startswith(bom):
            raise InputFileError(f"is {name} encoded (it starts with a {name} byte order mark): save it as UTF-8")
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    nul = data.find(b"\x00")
    if nul >= 0:
        # UTF-16 without a byte order mark: ASCII text has a zero in every other byte (one NUL in a short file
        # is a binary file, not that).
        sample = data[:64]
        half = len(sample) // 2
        if half >= 2 and max(sample[1::2].count(0), sample[0::2].count(0)) >= max(2, half * 3 // 4):
            raise InputFileError("looks UTF-16 encoded (every other byte is zero): save it as UTF-8")
        raise InputFileError(f"holds a NUL byte (offset {nul:,}): a binary file, not text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise InputFileError(
            f"is not UTF-8 text: byte 0x{data[error.start]:02X} on line {line} (Latin-1 or Windows-1252?): save it as UTF-8"
        ) from None
