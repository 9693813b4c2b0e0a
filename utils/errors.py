"""The exceptions main.py turns into one sentence instead of a traceback."""
import re


class UserError(Exception):
    """A bad flag, missing data or an unusable file: main.py prints the message and exits 2."""


class WriteFailed(Exception):
    """An output (results, CSV, plot, checkpoint) could not be written: the disk is full, the
    file is immutable, ... The previous file is kept; main.py prints the message and exits 1."""


class RankLost(Exception):
    """Another rank of a distributed job ended or stopped answering mid-run: main.py prints the
    message and exits 1 (that rank's own output says why)."""


def without_remedy(refusal: str) -> str:
    """A refusal's reason without its remedy, for a sentence that names what to do instead."""
    return re.split(r"[:;] ", refusal.rstrip("."), maxsplit=1)[0]


def not_installed(name: str) -> str:
    """The sentence that says a module ampbench needs (torch, torchvision) is missing here, and how to install it."""
    return (f"{name} is not installed in this Python: pip install -r requirements.txt (or run inside a PyTorch "
            "container).")
