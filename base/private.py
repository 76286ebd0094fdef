"""Files only the owner can read: 0600 files and 0700 directories, whatever the umask.

The database, its WAL, payload files, backups and exports hold whole conversations (and whatever
secrets were pasted into them); under the usual umask 022 they would be readable by every local
user. Modes are set at creation (``os.open`` with 0600, ``mkdir`` with 0700) and then set again
with ``chmod``, since the umask can only take permissions away and an odd one (000, 277) would
leave the file open or unusable. Files are created exclusively and never through a symlink: a
planted link must not redirect a write. Only what the engine creates (or its own database files)
is changed; a directory the user made (``~/.hermes``) keeps its mode.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import tempfile
from pathlib import Path

FILE_MODE = 0o600
DIR_MODE = 0o700
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class UnsafePath(OSError):
    """A path the engine will not write through or read (a symlink where a file or directory belongs)."""


def make_dir(path: str | os.PathLike[str], *, refuse_link: bool = False) -> Path:
    """``path`` as a directory; each one created here is 0700. ``refuse_link``: a symlink at ``path``
    is an :class:`UnsafePath` (a planted link would send our files elsewhere)."""
    target = Path(path)
    if refuse_link and target.is_symlink():
        raise UnsafePath(f"{target} is a symlink; refusing to use it (replace it with a directory)")
    missing: list[Path] = []
    probe = target
    while not probe.exists() and not probe.is_symlink() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):  # another process made it meanwhile
            directory.mkdir(mode=DIR_MODE)
            os.chmod(directory, DIR_MODE)
    if not target.is_dir():
        raise NotADirectoryError(f"{target} is not a directory")
    return target


def open_dir(path: str | os.PathLike[str]) -> int:
    """A descriptor of the directory ``path`` itself, refusing a symlink there; files are then
    created and renamed relative to it (``dir_fd``), so swapping the directory for a link later
    redirects nothing."""
    try:
        return os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | NOFOLLOW)
    except OSError as exc:
        if Path(path).is_symlink():
            raise UnsafePath(
                f"{path} is a symlink; refusing to use it (replace it with a directory)"
            ) from exc
        raise


def write_new(directory: str | os.PathLike[str], name: str, data: bytes) -> bool:
    """Write ``directory/name`` once, atomically: an exclusive 0600 temp file with an unpredictable
    name, renamed into place; False when ``name`` already exists. A symlink at ``name`` is not ours
    and is replaced; a symlink at ``directory`` is an :class:`UnsafePath`.

    A file found already is touched (its mtime is now): a content-addressed file a writer is about to
    reference again is then fresh, and payload GC (payload_gc.py) keeps fresh files. If GC took it
    away meanwhile, the touch fails and the file is written anew."""
    dfd = open_dir(directory)
    try:
        try:
            found = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            found = None
        if found is not None and not stat.S_ISLNK(found.st_mode):
            try:
                os.utime(name, dir_fd=dfd, follow_symlinks=False)
                return False
            except FileNotFoundError:
                pass
            except OSError:  # a file we cannot touch (not ours): it exists, as before
                return False
        tmp = f".{name}.{secrets.token_hex(8)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW, FILE_MODE, dir_fd=dfd)
        try:
            with os.fdopen(fd, "wb") as handle:
                os.fchmod(handle.fileno(), FILE_MODE)
                handle.write(data)
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            with contextlib.suppress(
                OSError
            ):  # a partial file would hold the space a full disk needs
                os.unlink(tmp, dir_fd=dfd)
            raise
        return True
    finally:
        os.close(dfd)


def read_in(directory: str | os.PathLike[str], name: str, *, single_link: bool = True) -> bytes:
    """The bytes of the regular file ``directory/name``; a symlink at either, something that is not a
    regular file (a FIFO would block the read forever: the open does not wait, the type is checked on
    the descriptor) or a file with a second hard link (it may be anyone's file) is an :class:`UnsafePath`."""
    dfd = open_dir(directory)
    try:
        try:
            fd = os.open(name, os.O_RDONLY | NOFOLLOW | getattr(os, "O_NONBLOCK", 0), dir_fd=dfd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                if stat.S_ISLNK(os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mode):
                    raise UnsafePath(f"{name} is a symlink; not read") from exc
            raise
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise UnsafePath(f"{name} is not a regular file")
            if (
                single_link and info.st_nlink > 1
            ):  # ours are written once, never linked (a peer's file may be)
                raise UnsafePath(f"{name} has {info.st_nlink} hard links; not read")
            return handle.read()
    finally:
        os.close(dfd)


def restrict(path: str | os.PathLike[str]) -> None:
    """Make an existing file of ours 0600 (never through a symlink; a file we cannot change stays)."""
    with contextlib.suppress(OSError):
        if not Path(path).is_symlink():
            os.chmod(path, FILE_MODE)


def create_empty(path: str | os.PathLike[str]) -> bool:
    """Create ``path`` as an empty 0600 file if it does not exist; True when it was created here.

    SQLite then opens the file we made, and gives its -wal/-shm/-journal the same mode."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW, FILE_MODE)
    except FileExistsError:
        return False
    try:
        os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)
    return True


def temp_file(
    directory: str | os.PathLike[str], prefix: str, suffix: str = ".tmp"
) -> tuple[int, Path]:
    """A new 0600 file in ``directory`` with an unpredictable name, created exclusively (no planted
    file or symlink can be it); returns its open descriptor and path."""
    fd, name = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=directory)
    os.fchmod(fd, FILE_MODE)
    return fd, Path(name)
