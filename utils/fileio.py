"""Writing result files so that a failure never leaves a half-written or lost file, and
proving before any training that every output can be written that way."""
from __future__ import annotations

import contextlib
import errno
import fcntl
import glob
import os
import stat
import tempfile
from typing import BinaryIO, Callable, Iterator, List, Sequence, Tuple

from utils.errors import UserError, WriteFailed

NAME_MAX = 255  # bytes in one file name on Linux's file systems, where pathconf cannot say


def ensure_writable(path: str, flag: str) -> None:
    """Refuse, before any training, an output that atomic_write could not write: an empty
    name, something other than a regular file (a device, a FIFO, a symlink loop: renaming over
    it would replace it), a name too long for its file system, or a folder where no file can be
    created. Symlinks are followed, as atomic_write follows them. Nothing is created: a refused
    run leaves no trace."""
    if not path:
        raise UserError(f"{flag} needs a file name, and got an empty one; give a path or leave out {flag}.")
    real = resolved(path, flag)
    if os.path.isdir(real):
        raise UserError(f"{flag} {path} is a folder; give a file path.")
    if os.path.lexists(real) and not stat.S_ISREG(os.stat(real).st_mode):
        raise UserError(f"{flag} {path} is not a regular file ({kind_of(real)}), and ampbench writes results "
                        "by replacing the file; give a file path.")
    try:
        prove_creatable(real)
    except OSError as error:
        raise UserError(f"cannot write {flag} {path} ({error.strerror or error}); "
                        "choose a writable path.") from None


def ensure_appendable(path: str, flag: str) -> None:
    """Refuse, before any training, an existing file that appends cannot reach (read-only,
    immutable); opening it to append changes nothing there."""
    if not os.path.isfile(path):
        return
    try:
        with open(path, "ab"):
            pass
    except OSError as error:
        raise UserError(f"cannot append to {flag} {path} ({error.strerror or error}); make it writable or "
                        "choose another path.") from None


def ensure_folder_writable(folder: str, flag: str) -> None:
    """Refuse, before any training, an output folder that is not one or cannot take a file."""
    if not folder:
        raise UserError(f"{flag} needs a path, and got an empty one; give a folder or leave out {flag}.")
    real = resolved(folder, flag)
    if os.path.lexists(real) and not os.path.isdir(real):
        raise UserError(f"{flag} {folder} is not a folder; give a folder (it is created if missing).")
    try:
        prove_creatable(os.path.join(real, "x"))
    except OSError as error:
        raise UserError(f"cannot write {flag} {folder} ({error.strerror or error}); "
                        "choose a writable folder.") from None


def prove_creatable(path: str) -> None:
    """Raise the OSError that writing `path` (its missing folders created) would raise: every
    name within the file system's limit, and a probe file created and removed in the nearest
    folder that exists. Creates nothing that stays. The probe is never named like a killed
    write's leftover: in a job every rank probes --checkpoint while rank 0 removes those."""
    existing, missing = os.path.dirname(path), [os.path.basename(path)]
    while not os.path.lexists(existing):
        existing, name = os.path.split(existing)
        missing.append(name)
    if not os.path.isdir(existing):
        raise OSError(errno.ENOTDIR, f"{existing} is not a folder")
    longest = max(len(os.fsencode(name)) for name in missing)
    if longest > name_max(existing):
        raise OSError(errno.ENAMETOOLONG, f"its name is longer than the {name_max(existing)} bytes a file name "
                                          "may have there")
    fd, probe = temporary_beside(os.path.join(existing, missing[-1]), suffix=".probe")
    os.close(fd)
    os.unlink(probe)


def resolved(path: str, flag: str) -> str:
    """The file a write to `path` lands in, symlinks followed; a symlink loop is refused."""
    try:
        os.stat(path)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise UserError(f"{flag} {path} is a symlink loop; give a file path.") from None
    return os.path.realpath(path)


def kind_of(path: str) -> str:
    mode = os.stat(path).st_mode
    return ("a folder" if stat.S_ISDIR(mode) else "a character device" if stat.S_ISCHR(mode)
            else "a block device" if stat.S_ISBLK(mode)
            else "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a file")


def name_max(folder: str) -> int:
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        return NAME_MAX


def temporary_prefix(path: str) -> str:
    """The start of the temporary files' names beside `path`: short enough that the longest
    allowed name still leaves room for the random part."""
    return f".{os.path.basename(path)[:40]}."


def temporary_beside(path: str, suffix: str = ".tmp") -> Tuple[int, str]:
    """mkstemp's (fd, name) in `path`'s folder, named after it."""
    return tempfile.mkstemp(dir=os.path.dirname(path), prefix=temporary_prefix(path), suffix=suffix)


def remove_leftovers(path: str) -> int:
    """Remove the temporary files a killed write to `path` left behind; returns their total size.
    Only one process may write a given path at a time, so any such file is a leftover."""
    removed = 0
    pattern = glob.escape(temporary_prefix(os.path.realpath(path))) + "*.tmp"
    for leftover in glob.glob(os.path.join(glob.escape(os.path.dirname(os.path.realpath(path))), pattern)):
        try:
            size = os.stat(leftover).st_size
            os.unlink(leftover)
            removed += size
        except OSError:
            pass  # gone already, or not ours to remove: it stays, as it did before
    return removed


def lock_path(path: str) -> str:
    """The file whose exclusive lock serialises appends to `path` (concurrent jobs share a CSV)."""
    real = os.path.realpath(path)
    return os.path.join(os.path.dirname(real), f".{os.path.basename(real)[:200]}.lock")


def ensure_lockable(path: str, flag: str) -> None:
    """Prove before any training that the lock beside `path` can be taken (created later)."""
    lock = lock_path(path)
    try:
        if os.path.lexists(lock):
            if not stat.S_ISREG(os.stat(lock).st_mode):
                raise OSError(errno.EEXIST, f"{kind_of(lock)} is there, not a regular file")
            with open(lock, "a"):
                pass
        else:
            prove_creatable(lock)
    except OSError as error:
        raise UserError(f"cannot lock {flag} {path} for appending: {lock_path(path)} is not a writable file "
                        f"({error.strerror or error}); remove it or choose another path.") from None


@contextlib.contextmanager
def held_or_refused(folder: str, refusal: str) -> Iterator[None]:
    """Run the block holding the exclusive lock of `folder` itself (nothing is left in it), or
    raise UserError(`refusal`) at once when another process holds it. The kernel drops a lock
    with the process that held it, so a killed holder leaves none stuck; on a file system
    without such locks (some network mounts) the block runs unlocked, as it would without this."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UserError(refusal) from None
        except OSError as error:
            if error.errno not in (errno.ENOLCK, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EBADF):
                raise
        yield
    finally:
        os.close(fd)


def atomic_write(path: str, write: Callable[[BinaryIO], object]) -> None:
    """Call write(file) on a temporary file in the same folder, fsync it, then rename it over
    `path`: readers see the old file or the new one, never a partial one. A symlink is
    followed: its target is replaced, the link stays."""
    atomic_write_all([(path, write)])


def atomic_write_all(writes: Sequence[Tuple[str, Callable[[BinaryIO], object]]]) -> None:
    """atomic_write for files that belong together (a report and the document it prints): each
    written to its temporary file first; only when every one is written whole are they renamed
    over their paths, so that a failure (a full disk) leaves each path as it was."""
    written: List[Tuple[str, str, str]] = []  # (the path as given, the real path, its temporary file)
    try:
        for shown, write in writes:
            path = os.path.realpath(shown)
            try:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                if os.path.lexists(path) and not stat.S_ISREG(os.stat(path).st_mode):
                    raise OSError(errno.EEXIST, f"{kind_of(path)} is there, not a regular file")
                fd, tmp = temporary_beside(path)
            except OSError as error:
                raise WriteFailed(f"could not write {shown} ({error.strerror or error}); nothing was changed "
                                  "there.") from None
            written.append((shown, path, tmp))
            try:
                os.fchmod(fd, creation_mode())  # mkstemp's 0600 would hide results from the project's group
                with os.fdopen(fd, "wb") as f:
                    write(f)
                    f.flush()
                    os.fsync(f.fileno())
            except OSError as error:
                raise WriteFailed(f"could not write {shown} ({error.strerror or error}); the file there before, if "
                                  "any, is kept as it was.") from None
        for index, (shown, path, tmp) in enumerate(written):
            try:
                os.replace(tmp, path)
            except OSError as error:
                written = written[index:]  # those renamed are written whole; the rest are not
                raise WriteFailed(f"could not write {shown} ({error.strerror or error}); the file there before, "
                                  "if any, is kept as it was.") from None
    except BaseException:
        for _, _, tmp in written:
            if os.path.lexists(tmp):
                os.unlink(tmp)
        raise


def creation_mode() -> int:
    """The mode open() gives a new file: 0666 less the process's umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask
