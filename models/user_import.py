"""The module of --model-factory MODULE:FUNCTION imported as `python -c "import MODULE"` would
import it from the working directory or PYTHONPATH, with what the user's code changes of the
process put back and said (kept_state), and a name that `import` has already taken (Python's,
ampbench's own packages, an installed library's) refused, saying whose it is and the fix."""
from __future__ import annotations

import contextlib
import importlib
import importlib.machinery
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Iterator, List, NamedTuple, Optional

import torch

from models.raised import AMPBENCH, STANDARD_LIBRARY, described, library_of, remedy
from models.spec import factory_spec
from utils import compat, stop
from utils.errors import UserError

MISSING = object()


@contextlib.contextmanager
def working_directory_importable() -> Iterator[None]:
    """The working directory on sys.path while the user's model is imported, built and checked,
    as `python -c "import MODULE"` would find it (after the first entry: ampbench's own folder
    under `python main.py`), and sys.path as it was afterwards. This is the --model-factory
    feature, not packaging: ampbench's own code is found by its install or its checkout, and once
    the model is built no module ampbench imports later can be taken from the user's folder."""
    here, before = os.getcwd(), list(sys.path)
    if not any(os.path.realpath(entry or ".") == os.path.realpath(here) for entry in sys.path):
        sys.path.insert(1, here)
    try:
        yield
    finally:
        sys.path[:] = before


class Kept(NamedTuple):
    """A setting of the process the user's code may change: how to read and set it, and what
    changing it is, in words, given the value it was changed to."""
    read: Callable[[], Any]
    write: Callable[[Any], Any]
    said: Callable[[Any], str]


def settings() -> List[Kept]:
    """torch's gradient mode (a model trained with it off gets no gradient), its default dtype
    (layers built after it are float64), anomaly detection (every backward many times slower),
    its default device (where this torch has one) and the working directory (where relative
    outputs go)."""
    kept = [Kept(torch.is_grad_enabled, torch.set_grad_enabled,
                 lambda on: f"turned torch's gradient mode {'on' if on else 'off'}"),
            Kept(torch.get_default_dtype, torch.set_default_dtype,
                 lambda dtype: f"set torch's default dtype to {str(dtype).replace('torch.', '')}"),
            Kept(torch.is_anomaly_enabled, torch.set_anomaly_enabled,
                 lambda on: f"turned autograd's anomaly detection {'on' if on else 'off'}"),
            Kept(os.getcwd, os.chdir, lambda folder: f"changed the working directory to {folder}")]
    if compat.has_default_device():  # the CPU by torch's own default: no device mode, which slows every call
        kept.insert(3, Kept(torch.get_default_device,
                            lambda device: torch.set_default_device(None if device == torch.device("cpu") else device),
                            lambda device: f"set torch's default device to {device}"))
    return kept


@contextlib.contextmanager
def kept_state() -> Iterator[List[str]]:
    """The settings() and the stop signals' handlers put back as they were before the block,
    whatever the user's code in it changed; yields the list that then says, in words, what was
    changed: each would change how every mode trains, where a relative output is written, or
    whether a scheduler's signal saves the run."""
    kept = [(setting, setting.read()) for setting in settings()]
    handlers = {number: signal.getsignal(number) for number in stop.SIGNALS}
    changed: List[str] = []
    try:
        yield changed
    finally:
        for setting, value in kept:
            now = setting.read()
            if now != value:
                changed.append(setting.said(now))
                setting.write(value)
        if threading.current_thread() is threading.main_thread():
            replaced = [number for number, handler in handlers.items()
                        if handler is not None and signal.getsignal(number) != handler]
            for number in replaced:
                signal.signal(number, handlers[number])
            if replaced:
                changed.append(f"set its own handler of {', '.join(signal.Signals(n).name for n in replaced)}")


def put_back(changed: List[str]) -> str:
    """What the user's code changed (kept_state's), and that it is undone, in words."""
    return (f"{', '.join(changed[:-1])}{' and ' if len(changed) > 1 else ''}{changed[-1]}; "
            f"{'it is' if len(changed) == 1 else 'each is'} put back as it was, so that every mode trains, and every "
            "output is written, as without it.")


def find(spec: str) -> Callable[..., Any]:
    """The callable `spec` names, imported as `python -c "import MODULE"` would from the working
    directory (put on sys.path after ampbench's own folder) or PYTHONPATH."""
    module_name, path = factory_spec(spec)
    module = import_module(module_name, spec)
    found: Any = module
    for depth, part in enumerate(path.split(".")):
        inside = ".".join([module_name, *path.split(".")[:depth]])
        found = getattr(found, part, MISSING)
        if found is MISSING:
            raise UserError(f"--model-factory {spec}: {inside} ({where_defined(module)}) has no attribute '{part}'; "
                            "name a function or class defined in it.")
    if not callable(found):
        raise UserError(f"--model-factory {spec}: {path} is not a function or class (it is of type "
                        f"{type(found).__name__}); name the function or class that builds the model.")
    return found


def import_module(name: str, spec: str) -> Any:
    """The module `name` (the working directory on sys.path: working_directory_importable); one
    sentence for each way it fails, a name another module holds first among them (refuse_taken)."""
    here = os.getcwd()
    try:
        module = importlib.import_module(name)
    except ImportError as error:
        imported = error.name or ""
        if imported.split(".")[0] == name.split(".")[0]:
            refuse_taken(name, spec, f"'{name.split('.')[0]}'")
        elif imported:
            refuse_taken(imported, spec, f"importing {name} failed, as it imports {imported}, and "
                         f"'{imported.split('.')[0]}'", imported_by_it=True)
        if isinstance(error, ModuleNotFoundError) and (name == imported or name.startswith(imported + ".")):
            raise UserError(f"--model-factory {spec}: no module named '{imported}' in the working directory "
                            f"({here}) or on PYTHONPATH; run from the folder that holds it, or add that folder to "
                            "PYTHONPATH.") from None
        if isinstance(error, ModuleNotFoundError):
            raise UserError(f"--model-factory {spec}: importing {name} failed, as it imports {described(error)}; "
                            "install what it needs.") from None
        raise UserError(f"--model-factory {spec}: importing {name} raised {described(error)}; "
                        f"{remedy(error, 'fix the module')}.") from None
    except Exception as error:  # whatever the module's own code raises as it is imported, SyntaxError too
        raise UserError(f"--model-factory {spec}: importing {name} raised {described(error)}; "
                        f"{remedy(error, 'fix the module')}.") from None
    refuse_taken(name, spec, f"'{name.split('.')[0]}'")
    return module


def refuse_taken(name: str, spec: str, named: str, imported_by_it: bool = False) -> None:
    """Refuse the module `name` where its top-level name is one the user has a module or package
    of on their path (the working directory, PYTHONPATH) and `import` took another already
    imported: one of Python's standard library (json), of ampbench's own packages (models,
    utils), of an installed library (numpy). `named` opens the sentence; the fix is to rename
    theirs, or make the folder that holds it a package of its own, run from its parent (with the
    imports of it relative, where the factory's module imports it: `imported_by_it`)."""
    top = name.split(".")[0]
    theirs, imported = users_module(top), sys.modules.get(top)
    if theirs is None or imported is None or same_module(imported, theirs):
        return
    folder = theirs.parent if theirs.name != "__init__.py" else theirs.parent.parent
    kind = "package" if theirs.name == "__init__.py" or theirs.is_dir() else "module"
    other = ""
    if folder.name.isidentifier() and folder.resolve() != AMPBENCH:
        module, function = spec.split(":", 1)
        relative = f", its imports of {top} relative: from .{top} import ..." if imported_by_it else ""
        other = (f", or make {folder} a package of its own (an __init__.py in it{relative}) and run from "
                 f"{folder.parent} with --model-factory {folder.name}.{module}:{function}")
    shown = theirs.parent if theirs.name == "__init__.py" else theirs
    raise UserError(f"--model-factory {spec}: {named} is a name taken by {owner(imported)}, which `import {top}` "
                    f"finds before your {kind} {shown}; rename your {kind} (and what imports it){other}.")


def users_module(top: str) -> Optional[Path]:
    """The module file, package folder or package __init__.py of the top-level name `top` on the
    user's own path (the working directory, then PYTHONPATH's folders, but ampbench's own), or None."""
    folders = [os.getcwd(), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    found = importlib.machinery.PathFinder.find_spec(top, [folder for folder in folders
                                                           if Path(folder).resolve() != AMPBENCH])
    if found is None:
        return None
    if found.origin not in (None, "namespace"):
        return Path(str(found.origin))
    return Path(list(found.submodule_search_locations or [top])[0])  # a namespace package: its first folder


def same_module(module: Any, path: Path) -> bool:
    """Whether the imported `module` is the one whose file or folder is `path`."""
    where = getattr(module, "__file__", None)
    if where is not None:
        return Path(where).resolve() == path.resolve()
    return path.resolve() in [Path(folder).resolve() for folder in getattr(module, "__path__", [])]


def owner(module: Any) -> str:
    """Whose the imported `module` is, and where, in words."""
    where = getattr(module, "__file__", None)
    if where is None:
        return "a module built into Python" if module.__name__ in sys.builtin_module_names else \
            f"the namespace package {module.__name__}"
    path = Path(where).resolve()
    shown = path.parent if path.name == "__init__.py" else path
    if AMPBENCH in path.parents:
        return f"ampbench's own package ({shown})"
    library = library_of(str(path))
    if library is not None:
        return f"the installed library {library} ({shown})"
    if str(path).startswith(tuple(STANDARD_LIBRARY)):
        return f"Python's standard library ({shown})"
    return f"the module {shown}, imported already"


def where_defined(module: Any) -> str:
    return str(getattr(module, "__file__", None) or "a namespace package")
