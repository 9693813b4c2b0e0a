"""Where an exception raised by the user's code (--model-factory) came from, in words: the
innermost line of the user's own code, and, where the code that raised it is an installed
library's (transformers, timm: anything in site-packages but torch), that library, its version
and its line, so that its error is named as its own and never blamed on ampbench's flags."""
from __future__ import annotations

import sys
import sysconfig
import traceback
from pathlib import Path
from typing import NamedTuple, Optional

import torch
from torch import nn

from utils.errors import RankLost, UserError, WriteFailed

AMPBENCH = Path(__file__).resolve().parents[1]  # the checkout: its own packages (models, utils) come first
TORCH = Path(torch.__file__).resolve().parent


class Place(NamedTuple):
    """Where an exception was raised: the innermost frame of the user's code, and, where the
    innermost code that raised it is a library's (transformers, timm: not torch's), that frame
    and the library's name."""
    users: Optional[traceback.FrameSummary]
    library: Optional[traceback.FrameSummary]
    library_name: Optional[str]


STANDARD_LIBRARY = sorted({sysconfig.get_paths()[kind] for kind in ("stdlib", "platstdlib")})
PACKAGE_FOLDERS = ("site-packages", "dist-packages")  # where pip and Debian install libraries
OWN = (AMPBENCH / "main.py", AMPBENCH / "models", AMPBENCH / "utils")


def installed(filename: str) -> Optional[Path]:
    """The path of `filename` inside the site-packages (or dist-packages) folder it is installed
    in (transformers/models/vit/modeling_vit.py), or None for a file not installed so."""
    parts = Path(filename).parts
    starts = [index for index, part in enumerate(parts) if part in PACKAGE_FOLDERS]
    return Path(*parts[starts[-1] + 1:]) if starts and starts[-1] + 1 < len(parts) else None


def library_of(filename: str) -> Optional[str]:
    """The top-level package of the installed library (torch's too) that `filename` belongs to, or None."""
    inside = installed(filename)
    if inside is None:
        return None
    top = inside.parts[0]
    return top[:-3] if top.endswith(".py") else top


def kind_of(filename: str) -> str:
    """"library", "user" (the user's code) or "other" (torch, ampbench, Python's own, generated)."""
    if filename.startswith("<"):
        return "other"
    path = Path(filename).resolve()
    if any(path == top or top in path.parents for top in (TORCH, *OWN)):
        return "other"
    if library_of(str(path)) is not None:
        return "library"
    return "other" if str(path).startswith(tuple(STANDARD_LIBRARY)) else "user"


def place_of(error: BaseException) -> Place:
    frames = [frame for frame in traceback.extract_tb(error.__traceback__) if kind_of(frame.filename) != "other"]
    users = [frame for frame in frames if kind_of(frame.filename) == "user"]
    library = frames[-1] if frames and kind_of(frames[-1].filename) == "library" else None
    return Place(users[-1] if users else None, library, library_of(library.filename) if library else None)


def described(error: BaseException) -> str:
    """An exception in a few words, with where it was raised: the innermost line of the user's
    code, and where the innermost code that raised it is a library's (transformers, timm), that
    library, its version and its line (a SyntaxError names its own place)."""
    message = (str(error).strip().splitlines() or [""])[0][:200].rstrip(".")
    said = f"{type(error).__name__}{': ' + message if message else ''}"
    if isinstance(error, SyntaxError):
        return said
    place = place_of(error)
    if place.library is not None:
        version = getattr(sys.modules.get(place.library_name or ""), "__version__", None)
        said += (f" inside the library {place.library_name}{' ' + version if isinstance(version, str) else ''} "
                 f"({installed(place.library.filename)}:{place.library.lineno})")
        return said + (f", called from {place.users.filename}:{place.users.lineno}" if place.users else "")
    return said + (f" at {place.users.filename}:{place.users.lineno}" if place.users else "")


def remedy(error: BaseException, otherwise: str) -> str:
    """What to do about `error`: where a library raised it, look at what the factory asks of
    that library (the error is its own); else `otherwise`."""
    library = place_of(error).library_name
    if library is None or isinstance(error, SyntaxError):
        return otherwise
    return (f"{library} raised it, so check how the factory builds and configures the model with {library} "
            "(its documentation explains the message)")


def raised_by_its_code(error: BaseException) -> bool:
    """Whether `error` came out of the user's model as a run trained or evaluated it: it passed
    through a frame of the user's own code (a file that is neither ampbench's, torch's, a
    library's nor Python's), or through a layer of a library's model (an nn.Module's method in an
    installed library other than torch: transformers, timm); ampbench's own refusals never did."""
    if isinstance(error, (UserError, WriteFailed, RankLost)):
        return False
    trace = error.__traceback__
    while trace is not None:
        kind = kind_of(trace.tb_frame.f_code.co_filename)
        if kind == "user" or (kind == "library" and isinstance(trace.tb_frame.f_locals.get("self"), nn.Module)):
            return True
        trace = trace.tb_next
    return False
