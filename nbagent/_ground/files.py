"""Opening a file a person named, without hanging on something that is not a file.

A path may name a FIFO (opening it waits for the other end, for ever), a device (``/dev/zero``
reads without end, ``/dev/null`` swallows every line) or a folder. A file nbagent reads or
appends to because a person named it is therefore opened without blocking and used only when
it is a regular file (a symbolic link to one is fine); anything else is refused at once,
saying what it is. Recordings are read the same way.
"""

from __future__ import annotations

import errno
import os
import stat

__all__ = ["NotRegularFileError", "open_regular"]


class NotRegularFileError(OSError):
    """The path names a FIFO, a device, a socket or a folder."""


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a regular file"


def open_regular(path: str | os.PathLike[str], *, append: bool = False) -> int:
    """A descriptor of ``path``, read-only or (``append``) for appending, created if missing.

    Raises :class:`NotRegularFileError` for anything but a regular file, before a byte is read
    or written, and ``OSError`` as ``os.open`` does otherwise.
    """
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT if append else os.O_RDONLY
    flags |= getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        handle = os.open(path, flags, 0o666)
    except OSError as exc:
        # A FIFO nobody reads refuses a non-blocking writer (ENXIO); a folder refuses writing.
        if exc.errno in (errno.ENXIO, errno.EISDIR, errno.ENODEV):
            try:
                mode = os.stat(path).st_mode
            except OSError:
                raise exc from None
            if not stat.S_ISREG(mode):
                raise NotRegularFileError(exc.errno, f"it is {_kind(mode)}") from None
        raise
    try:
        mode = os.fstat(handle).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFileError(errno.EINVAL, f"it is {_kind(mode)}")
        if hasattr(os, "set_blocking"):
            os.set_blocking(handle, True)  # a regular file never blocks; keep it ordinary
    except BaseException:
        os.close(handle)
        raise
    return handle
