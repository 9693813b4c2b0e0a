"""The user's own model (--model-factory MODULE:FUNCTION): imported from the working directory or
PYTHONPATH, built, and checked with one tiny forward before anything trains, so that each way it
can be wrong (no such module or function, a name another module holds, something that builds no
trainable classifier, an output that does not fit the run's classes) ends in one sentence before
the first step. Models as libraries build them are taken as they are: an output object that holds
`logits` (Hugging Face's), lazy layers, an error raised inside the library named as that library's."""
from __future__ import annotations

import contextlib
import copy
import importlib
import importlib.machinery
import inspect
import os
import signal
import sys
import sysconfig
import threading
import traceback
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Mapping, NamedTuple, Optional, Tuple

import torch
from torch import nn

from models import factory
from models.spec import factory_spec
from utils import compat, stop
from utils.errors import RankLost, UserError, WriteFailed

AMPBENCH = Path(__file__).resolve().parents[1]  # the checkout: its own packages (models, utils) come first
# What the factory is given, by name, where its signature names the parameter (never through **kwargs,
# which may pass them on to a builder that refuses them).
GIVEN = ("num_classes", "image_size", "dropout")
TORCH = Path(torch.__file__).resolve().parent
MISSING = object()


def build_user_model(spec: str, num_classes: int, image_size: int, dropout: Optional[float] = None,
                     batch_size: Optional[int] = None, device: Optional[torch.device] = None,
                     warn: Optional[Callable[[str, str], None]] = None) -> nn.Module:
    """The model `spec` (MODULE:FUNCTION) builds, called with those of num_classes, image_size
    and dropout (when given) its signature names, checked: an nn.Module with trainable float32
    parameters (lazy ones settled by one batch) whose output for a batch of `image_size` images
    is, or holds as `logits`, (batch, `num_classes`) logits that carry a gradient, and whose
    batch norms see more than one value per channel in a batch of `batch_size`. The check runs on
    the meta device where it can, else on `device` (the CPU unless given). What importing the
    module and calling the factory change of the process is put back (kept_state) and said to
    `warn(sentence, kind)`, as are logits taken from an output object; a stop signal ends the
    build at once (stop.at_once): the user's code may never return."""
    say = warn or (lambda sentence, kind: None)
    with working_directory_importable(), stop.at_once(f"building the model of --model-factory {spec}"):
        with kept_state() as changed:
            function = find(spec)
        if changed:
            say(f"--model-factory {spec}: importing {factory_spec(spec)[0]} {put_back(changed)}", "warning")
        with kept_state() as changed:
            model = call(function, spec, arguments_for(function, spec, num_classes, image_size, dropout))
        if changed:
            say(f"--model-factory {spec}: its factory {put_back(changed)}", "warning")
        check_module(model, spec, image_size)
        check_output(model, spec, num_classes, image_size, batch_size, device or torch.device("cpu"))
    hook = logits_hook(model)
    if hook is not None:
        say(f"--model-factory {spec}: its model returns {article(hook.returned)}, whose logits every mode trains on "
            f"and evaluates ({hook.taken}, recorded as config.model_output).", "note")
    return model


def put_back(changed: List[str]) -> str:
    """What the user's code changed (kept_state's), and that it is undone, in words."""
    return (f"{', '.join(changed[:-1])}{' and ' if len(changed) > 1 else ''}{changed[-1]}; "
            f"{'it is' if len(changed) == 1 else 'each is'} put back as it was, so that every mode trains, and every "
            "output is written, as without it.")


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


def article(word: str) -> str:
    """`word` after its indefinite article: a dict, an ImageClassifierOutput."""
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"


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


def raised_while_running(spec: str, error: BaseException) -> str:
    """The sentence for a model of `spec` that raised `error` after its check (raised_by_its_code)."""
    return (f"--model-factory {spec}: its model raised {described(error)} as the run trained or evaluated it; "
            f"{remedy(error, 'fix the model')}.")


class Arguments(NamedTuple):
    """What the factory is called with: the values of its positional-only parameters, in order,
    and the others by name."""
    positional: List[Tuple[str, Any]]
    keywords: Dict[str, Any]


def arguments_for(function: Callable[..., Any], spec: str, num_classes: int, image_size: int,
                  dropout: Optional[float]) -> Arguments:
    """The arguments `function` gets: those of GIVEN its signature names (dropout only when
    --dropout is given), by name, or in order for positional-only parameters (with the defaults
    of those before the last one given); a parameter it requires beyond them is refused, as is
    --dropout for a factory that takes no dropout."""
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):  # a callable without a signature (a builtin): called without arguments
        parameters = inspect.Signature().parameters
    values = {name: value for name, value in (("num_classes", num_classes), ("image_size", image_size),
                                              ("dropout", dropout)) if value is not None}
    named = [name for name, parameter in parameters.items()
             if parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD)]
    required = [name for name in named if name not in values and parameters[name].default is parameters[name].empty]
    if required:
        raise UserError(f"--model-factory {spec} requires {', '.join(required)}, and ampbench gives a factory only "
                        f"{', '.join(GIVEN)} (dropout with --dropout alone); give the other parameters defaults.")
    if dropout is not None and "dropout" not in named:
        raise UserError(f"--dropout {dropout:g}: --model-factory {spec} takes no dropout argument; drop --dropout, or "
                        "give the factory a dropout parameter.")
    only = [(name, parameter) for name, parameter in parameters.items() if parameter.kind == parameter.POSITIONAL_ONLY]
    last = max((index for index, (name, _) in enumerate(only) if name in values), default=-1)
    positional = [(name, values.get(name, parameter.default)) for name, parameter in only[:last + 1]]
    return Arguments(positional, {name: values[name] for name, parameter in parameters.items() if name in values
                                  and parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)})


def call(function: Callable[..., Any], spec: str, arguments: Arguments) -> Any:
    given = ", ".join(f"{name}={value}" for name, value in [*arguments.positional, *arguments.keywords.items()]) \
        or "no arguments"
    try:
        return function(*[value for _, value in arguments.positional], **arguments.keywords)
    except stop.StoppedAtOnce:
        raise
    except SystemExit as error:  # sys.exit() in the factory would end the run without a word
        raise UserError(f"--model-factory {spec} raised SystemExit({error.code!r}) when called with {given}, ending "
                        "the process; return the model, or raise an exception that says what is wrong.") from None
    except Exception as error:  # the user's code, raising anything
        raise UserError(f"--model-factory {spec} raised {described(error)} when called with {given}; "
                        f"{remedy(error, 'fix the factory')}.") from None


def check_module(model: Any, spec: str, image_size: int) -> None:
    """An nn.Module, not compiled by TorchScript, its lazy layers settled (settle_lazy), with
    parameters to train, all float32: the modes set the precision."""
    if not isinstance(model, nn.Module):
        raise UserError(f"--model-factory {spec} returned {article(type(model).__name__)}, not a torch.nn.Module; "
                        "return the model.")
    scripted = [name or "the model itself" for name, module in model.named_modules()
                if isinstance(module, torch.jit.ScriptModule)]
    if scripted:
        raise UserError(f"--model-factory {spec} returned a model compiled by TorchScript (torch.jit.script or trace: "
                        f"{scripted[0]}), and a copy of one, which every mode trains from, holds its weights as "
                        "tensors no optimizer can train; return the nn.Module before scripting or tracing it.")
    settle_lazy(model, spec, image_size)
    parameters = list(model.parameters())
    if any(parameter.is_meta for parameter in parameters):
        raise UserError(f"--model-factory {spec} returned {article(type(model).__name__)} whose parameters are on the "
                        "meta device, with no values to train; build it on the CPU, or materialize it (to_empty, then "
                        "initialize its weights) before returning it.")
    if not any(parameter.requires_grad for parameter in parameters):
        frozen = f"all {len(parameters)} of its parameters are frozen" if parameters else "it has none"
        raise UserError(f"--model-factory {spec} returned {article(type(model).__name__)} with no parameters to train "
                        f"({frozen}); return a model with trainable parameters.")
    other = sorted({str(p.dtype).replace("torch.", "") for p in parameters if p.is_floating_point()
                    and p.dtype != torch.float32})
    if other:
        raise UserError(f"--model-factory {spec} returned a model with {', '.join(other)} parameters; build it in "
                        "float32: each precision mode sets the precision it trains in.")


def unsettled(model: nn.Module) -> List[str]:
    """The lazy layers of `model` whose parameters have no shape yet, by name."""
    return [f"{name or 'the model'} ({type(module).__name__})" for name, module in model.named_modules()
            if any(isinstance(tensor, (nn.parameter.UninitializedParameter, nn.parameter.UninitializedBuffer))
                   for tensor in [*module.parameters(recurse=False), *module.buffers(recurse=False)])]


def settle_lazy(model: nn.Module, spec: str, image_size: int) -> None:
    """Give lazy layers (nn.LazyLinear, nn.LazyConv2d, ...) their shapes, as torch asks, with one
    forward of factory.CHECK_IMAGES blank images in evaluation mode (no batch norm statistics
    change), before anything counts or trains the parameters; refused with the fix where that
    forward fails or leaves one without a shape."""
    lazy = unsettled(model)
    if not lazy:
        return
    try:
        with torch.no_grad():
            model.eval()(torch.zeros(factory.CHECK_IMAGES, 3, image_size, image_size))
    except Exception as error:  # the user's forward, raising anything
        raise UserError(f"--model-factory {spec}: its model's lazy layers ({', '.join(lazy)}) take their shapes from "
                        f"a first batch, and a batch of {factory.CHECK_IMAGES} images of 3x{image_size}x{image_size} "
                        f"raised {described(error)}; give those layers their sizes, or run one batch through the model "
                        "in the factory.") from None
    finally:
        model.train()
    left = unsettled(model)
    if left:
        raise UserError(f"--model-factory {spec}: its model's lazy layers {', '.join(left)} got no shape from a "
                        "forward of a batch, as its forward never uses them; give them their sizes, or remove them.")


LOGITS = "logits"


def logits_in(output: Any) -> Optional[torch.Tensor]:
    """The logits an output object holds as its `logits` attribute (Hugging Face's ModelOutput, a
    named tuple, a dataclass) or key (a dict); None for a tensor or anything else."""
    if isinstance(output, torch.Tensor):
        return None
    try:
        found = getattr(output, LOGITS, None)
        if found is None and isinstance(output, Mapping):
            found = output.get(LOGITS)
    except Exception:  # a property or a lookup of the user's that raises: no logits to take
        return None
    return found if isinstance(found, torch.Tensor) else None


class TakeLogits:
    """A forward hook that makes the model's output the logits it holds (logits_in), wherever the
    run calls the model: every step of every mode, the evaluation, the FLOP count and --explain,
    with no change to the training step. `returned` is the output's type; `taken` says what of it
    is taken (ImageClassifierOutput.logits, dict['logits'])."""

    def __init__(self, output: Any):
        self.returned = type(output).__name__
        by_key = isinstance(output, Mapping) and not isinstance(getattr(output, LOGITS, None), torch.Tensor)
        self.taken = f"{self.returned}['{LOGITS}']" if by_key else f"{self.returned}.{LOGITS}"

    def __call__(self, module: nn.Module, inputs: Any, output: Any) -> Optional[torch.Tensor]:
        return logits_in(output)  # None (a tensor already) leaves the output as it is


def logits_hook(model: nn.Module) -> Optional[TakeLogits]:
    """The model's TakeLogits hook (check_output's), or None where its output is the logits."""
    return next((hook for hook in model._forward_hooks.values() if isinstance(hook, TakeLogits)), None)


def check_output(model: nn.Module, spec: str, num_classes: int, image_size: int, batch_size: Optional[int],
                 device: torch.device) -> None:
    """One forward of factory.CHECK_IMAGES images, in training mode and without changing the
    model (on the meta device, or on a copy on `device`), gives (images, num_classes) logits:
    a tensor, or an object that holds them as `logits` (the model then gives them: TakeLogits)."""
    images = factory.CHECK_IMAGES
    with factory.batch_norm_inputs(model) as values_per_image:
        output = forward_once(model, spec, image_size, device)
    held = logits_in(output)
    if held is not None:
        model.register_forward_hook(TakeLogits(output))
        output = held
    if not isinstance(output, torch.Tensor):
        raise UserError(f"--model-factory {spec}: its model returns {article(type(output).__name__)} for a batch of "
                        "images, not a tensor of logits nor an object holding them as `logits`; the loss takes its "
                        "output as (batch, classes) logits, so return them alone.")
    shape = list(output.shape)
    if len(shape) == 2 and shape[0] == images and shape[1] != num_classes:
        raise UserError(f"--model-factory {spec}: its model outputs {shape[1]} classes, and this run's labels have "
                        f"{num_classes} (the data's classes, or --num-classes); build its head for {num_classes} "
                        f"(the factory is given num_classes={num_classes} where it takes that argument).")
    if shape != [images, num_classes]:
        raise UserError(f"--model-factory {spec}: its model outputs a tensor of shape {shape} for {images} images of "
                        f"{image_size}x{image_size}, and a classifier's is [{images}, {num_classes}] (batch, "
                        "classes); return the logits.")
    if not output.is_floating_point():
        raise UserError(f"--model-factory {spec}: its model returns {str(output.dtype).replace('torch.', '')} values, "
                        "and the loss takes floating-point logits; return them before any rounding or argmax.")
    if not output.requires_grad:
        raise UserError(f"--model-factory {spec}: its model's output carries no gradient back to its parameters "
                        "(detached, computed under torch.no_grad, or not computed from them), so no step could train "
                        "it; return logits computed from its parameters.")
    factory.check_batch_for_norms(values_per_image, spec, image_size, batch_size)


def forward_once(model: nn.Module, spec: str, image_size: int, device: torch.device) -> Any:
    """The output of one forward in training mode, with gradients as a step computes them: on the
    meta device (shapes alone, torch 2.1), or, for a model that cannot run there, on a copy of it
    on `device`, with the random state restored after it (dropout draws)."""
    model.train()
    with torch.enable_grad(), torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        if compat.runs_on_meta():
            with contextlib.suppress(Exception):  # anything the model does that the meta device cannot
                return factory.forward_on_meta(model, image_size)
        try:
            twin = copy.deepcopy(model).to(device)
            return twin(torch.zeros(factory.CHECK_IMAGES, 3, image_size, image_size, device=device))
        except Exception as error:  # the user's forward, raising anything
            raise UserError(f"--model-factory {spec}: its model raised {described(error)} on a batch of "
                            f"{factory.CHECK_IMAGES} images of 3x{image_size}x{image_size}; "
                            f"{remedy(error, 'make it take --image-size images, or change --image-size')}.") from None
