"""Writing result files so that a failure never leaves a half-written or lost file."""
import os
import tempfile

from utils.errors import UserError, WriteFailed


def ensure_writable(path, flag):
    """Create the parent folder and prove a file can be written there, before any training."""
    folder = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(folder, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".ampbench-check-"):
            pass
    except OSError as error:
        raise UserError(f"cannot write {flag} {path} ({error.strerror or error}); "
                        "choose a writable path.") from None
    if os.path.isdir(path):
        raise UserError(f"{flag} {path} is a folder; give a file path.")


def atomic_write(path, write):
    """Call write(file) on a temporary file in the same folder, fsync it, then rename it over
    `path`: readers see the old file or the new one, never a partial one. A symlink is
    followed: its target is replaced, the link stays."""
    shown, path = path, os.path.realpath(path)
    folder = os.path.dirname(path)
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    except OSError as error:
        raise WriteFailed(f"could not write {shown} ({error.strerror or error}); nothing was changed there.") from None
    try:
        os.fchmod(fd, creation_mode())  # mkstemp's 0600 would hide results from the project's group
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as error:
        os.unlink(tmp)
        if isinstance(error, OSError):
            raise WriteFailed(f"could not write {shown} ({error.strerror or error}); "
                              "the file there before, if any, is kept as it was.") from None
        raise


def creation_mode():
    """The mode open() gives a new file: 0666 less the process's umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask
