"""The user's own model (--model-factory MODULE:FUNCTION): its module imported (user_import.py),
the model built, and checked with one tiny forward before anything trains, so that each way it
can be wrong (no such module or function, something that builds no trainable classifier, an
output that does not fit the run's classes) ends in one sentence before the first step, saying
where the error was raised (raised.py). Models as libraries build them are taken as they are: an
output object that holds `logits` (Hugging Face's) gives them, and lazy layers are settled by one
batch."""
from __future__ import annotations

import contextlib
import copy
import inspect
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Tuple

import torch
from torch import nn

from models import factory
from models.raised import described, remedy
from models.spec import factory_spec
from models.user_import import find, kept_state, put_back, working_directory_importable
from utils import compat, stop
from utils.errors import UserError

# What the factory is given, by name, where its signature names the parameter (never through **kwargs,
# which may pass them on to a builder that refuses them).
GIVEN = ("num_classes", "image_size", "dropout")


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


def article(word: str) -> str:
    """`word` after its indefinite article: a dict, an ImageClassifierOutput."""
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"


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
