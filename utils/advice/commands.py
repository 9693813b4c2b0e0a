"""The command lines of --advise: the main.py runs of its phases, the one it advises, and the batch
jobs that would settle the accuracy. The user's own flags (the model, the data, the recipe) reach
every one of them as main.py reads them, rebuilt from the parsed command line (its settings by
key) and the settings' flags (utils/config.py's SETTINGS), so a setting added to main.py passes
through without being named here. No torch."""
from __future__ import annotations

import math
import shlex
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from utils import config, modes
from utils.errors import UserError
from utils.results.compare import MIN_RUNS
from utils.settings import CommandLine

# No phase takes config.NOT_PASSED from the user (what the adviser sets itself, its own flags and
# the display); the speed phases choose their own length (config.LENGTH_KEYS) as well, the accuracy
# check keeps the user's.
# The batch-job scripts a user submits (cluster/stages.sh): every setting through the environment,
# which sbatch --export=ALL and qsub -V pass on (MODES holds commas, which their own lists split at).
JOB_SUBMIT = {"slurm": "sbatch --export=ALL run_slurm.sh", "pbs": "qsub -V run_pbs.sh"}


def user_options(arguments: CommandLine, leave_out: Iterable[str] = config.NOT_PASSED) -> List[str]:
    """The flags of `arguments` that differ from main.py's defaults (the model and the batch
    always, so that a command says what it trains: a --model-factory names the model in -m's
    place), in -h's order, as main.py reads them back: every setting but those of `leave_out`."""
    defaults, skipped, options = config.defaults(), set(leave_out), []
    if arguments["model_factory"] is not None:
        skipped.add("model")
    for name in config.SETTINGS:
        value = arguments[name]
        if name in skipped or (value == defaults[name] and name not in config.NAMED_KEYS):
            continue
        options += config.flag_words(name, value)
    return options


def saved_arguments(saved: Dict[str, Any], where: str) -> CommandLine:
    """The command line an advice.json (`where`) keeps (its `arguments`), with the settings this
    release has (an earlier release's precision switches, fp16, bf16, ..., are left out), each
    value one main.py's parser could give and all of them a command main.py takes; refused
    naming the field otherwise (a file edited by hand)."""
    kept = {name: value for name, value in saved.items() if name in config.SETTINGS}
    for name, value in kept.items():
        why = config.unusable_value(name, value)
        if why:
            raise UserError(f"{where}: arguments.{name} ({config.SETTINGS[name].name}) {why}; is it an advice.json "
                            "--advise wrote?")
    try:
        config.RunConfig.build(**{name: value for name, value in kept.items() if name not in ("check_flags",)})
    except UserError as refusal:
        raise UserError(f"{where}: its arguments are no command main.py takes ({str(refusal).rstrip('.')}); is it an "
                        "advice.json --advise wrote?") from None
    return config.command_line(**kept)


def with_settings(arguments: CommandLine, settings: Dict[str, Any]) -> CommandLine:
    """`arguments` with some settings replaced (a lever switched on or off)."""
    return {**arguments, **settings}


def words(**settings: Any) -> List[str]:
    """The flags that set main.py's `settings` (by key), in the order given, as main.py reads them back."""
    return [word for key, value in settings.items() for word in config.flag_words(key, value)]


def mode_flags(mode: str) -> List[str]:
    """The flags that train `mode` alone: none for fp32, the default."""
    return [] if mode == modes.BASELINES["default"] else words(modes=mode)


def advised_command(arguments: CommandLine, mode: str, settings: Dict[str, Any]) -> List[str]:
    """main.py's command that trains as advised: the user's flags, their length included, with the
    levers' `settings`, in `mode`."""
    options = user_options(with_settings(arguments, settings), config.NOT_PASSED)
    return ["python", "main.py", *options, *mode_flags(mode)]


def from_results_command(record: Dict[str, Any], on_gpu: bool, mode: str, settings: Dict[str, Any]) -> List[str]:
    """main.py's command that trains as advised, from a results file's config `record`: its model
    (or the factory that built it), batch, image size, accumulation and data kind (an image folder
    with its folder), with the levers' `settings` the advice decided (a lever the results never
    compared stays at main.py's default; the rest of a saved recipe is its own default)."""
    return advised_command(results_arguments(record, on_gpu), mode, settings)


def results_arguments(record: Dict[str, Any], on_gpu: bool) -> CommandLine:
    """The command line a results file's config `record` describes (from_results_command's)."""
    kept = {name: record[name] for name in ("model", "model_factory", "batch_size", "image_size", "accum_steps",
                                                   "epoch_images") if record.get(name) is not None}
    if "model_factory" in kept:  # the model's name is the factory's MODULE:FUNCTION, which -m cannot take
        del kept["model"]
    if record.get("data") in ("synthetic", *config.STREAMED_DATA):
        kept["data"] = record["data"]
    if record.get("data") in config.STREAMED_DATA:
        kept["data_dir"] = record["data_dir"]
    return config.command_line(**kept, gpu=on_gpu)


def compare_command(record: Dict[str, Any], on_gpu: bool) -> List[str]:
    """main.py's command that compares the modes this device runs at speed (but FP8, which only a
    GPU with FP8 tensor cores runs), 3 repeats in alternating order, in the setting of a results
    file's config `record`."""
    compared = [name for name in modes.weighed_on("cuda" if on_gpu else "cpu") if not modes.MODES[name].float8]
    return ["python", "main.py", *user_options(results_arguments(record, on_gpu)),
            *words(modes=",".join(compared), repeats=MIN_RUNS)]


def flags_of(settings: Dict[str, Any]) -> List[str]:
    """The flags that set `settings` (a lever's), as a user types them: "--channels-last",
    "--optimizer-impl foreach"."""
    options = user_options(config.command_line(**settings), (*config.NOT_PASSED, *config.NAMED_KEYS))
    words: List[str] = []
    for option in options:
        if option.startswith("-") or not words:
            words.append(option)
        else:
            words[-1] += f" {option}"
    return words


def phase_command(arguments: CommandLine, phase_flags: Sequence[str], keep_length: bool, results: str) -> List[str]:
    """main.py's arguments for one phase: the user's flags (their length only where `keep_length`),
    then the phase's own, writing its results to `results`."""
    leave_out = config.NOT_PASSED if keep_length else (*config.NOT_PASSED, *config.LENGTH_KEYS)
    return [*user_options(arguments, leave_out), *phase_flags, *words(json=results)]


def job_words(arguments: CommandLine) -> Optional[Tuple[List[str], List[str]]]:
    """(the job scripts' variables that carry the user's flags, `arguments`, but the length and the
    modes: MODEL, BATCH, CIFAR10_DIR where it is not the default, one node and GPU; EXTRA_ARGS'
    words); None when a flag holds a word that EXTRA_ARGS (split at white space, no quotes) cannot
    carry, or when the job scripts cannot train the user's model or data (they name a torchvision
    MODEL and train on CIFAR-10)."""
    if arguments["model_factory"] is not None or arguments["data"] == "imagefolder":
        return None
    extra = user_options(arguments, (*config.NOT_PASSED, *config.JOB_KEYS))
    if any(not word or any(character.isspace() or character in "'\"\\" for character in word) for word in extra):
        return None
    folder, model, batch = arguments["data_dir"], arguments["model"], arguments["batch_size"]
    data = [f"CIFAR10_DIR={shlex.quote(folder)}"] if folder != config.default_data_dir() else []
    return [f"MODEL={shlex.quote(model)}", f"BATCH={batch}", *data, "NODES=1",
            "GPUS_PER_NODE=1"], extra


def job_lines(arguments: CommandLine, modes: Sequence[str], seeds: int, steps: int) -> Optional[Dict[str, str]]:
    """{scheduler: one shell line} that submits a job per seed running `modes` for `steps`, each
    seed's modes from the same weights: what the accuracy check needs on a cluster; None where
    the job scripts cannot carry the user's flags (job_words)."""
    words = job_words(arguments)
    if words is None:
        return None
    variables, extra = words
    settings = [*variables[:2], f"STEPS={steps}", f"MODES={','.join(modes)}", *variables[2:],
                'EXTRA_ARGS="--seed $seed' + "".join(f" {word}" for word in extra) + '"']
    seeds_list = " ".join(str(arguments["seed"] + index) for index in range(seeds))
    return {scheduler: f"for seed in {seeds_list}; do {' '.join(settings)} {submit}; done"
            for scheduler, submit in JOB_SUBMIT.items()}


def accuracy_lines(arguments: CommandLine, lead: str, seeds: int, steps: Optional[int]) -> Dict[str, str]:
    """{where: one shell line} that runs the accuracy check of `lead` against fp32 over `seeds`
    paired seeds with the user's flags (`arguments`): here, and as batch jobs where `steps` (the
    run's length) is known and the job scripts can carry the flags."""
    flags = words(modes=f"{modes.BASELINES['default']},{lead}", seeds=seeds)
    lines = {"here": shell_line(["python", "main.py", *phase_command(arguments, flags, True, "accuracy.json")],
                                import_environment(arguments))}
    if steps is not None:
        lines.update(job_lines(arguments, (modes.BASELINES["default"], lead), seeds, steps) or {})
    return lines


def advise_job_lines(arguments: CommandLine, budget_minutes: float) -> Optional[Dict[str, str]]:
    """{scheduler: one shell line} that submits --advise with the user's flags (`arguments`) as a
    batch job (ADVISE=1) on a node of its own, `budget_minutes` long; None as job_words says."""
    words = job_words(arguments)
    if words is None:
        return None
    variables, extra = words
    given_steps = arguments["steps"]
    steps = [f"STEPS={given_steps}"] if given_steps is not None else []
    settings = ["ADVISE=1", f"BUDGET={math.ceil(budget_minutes)}", *variables, *steps,
                *([f'EXTRA_ARGS="{" ".join(extra)}"'] if extra else [])]
    return {scheduler: f"{' '.join(settings)} {submit}" for scheduler, submit in JOB_SUBMIT.items()}


NSYS = ("nsys", "profile", "--trace=cuda,nvtx,osrt,cudnn,cublas", "--output=advised")


def nsys_line(command: Sequence[str], environment: Optional[Dict[str, str]] = None) -> str:
    """The advised command under Nsight Systems, whose timeline shows each kernel, its launch and the gaps between."""
    return shell_line([*NSYS, *command], environment)


def shell_line(argv: Sequence[str], environment: Optional[Dict[str, str]] = None) -> str:
    """`argv` as one line a shell runs, after the variables of `environment` (VAR=value ...)."""
    return " ".join([*(f"{name}={shlex.quote(value)}" for name, value in (environment or {}).items()),
                     shlex.join(list(argv))])


def import_environment(arguments: CommandLine) -> Dict[str, str]:
    """What a command needs in its environment to import --model-factory's module as this
    process did, from the working directory or PYTHONPATH (models/user_import.py): PYTHONPATH
    naming the folder that holds it, where that is not ampbench's own checkout (which main.py's
    folder puts on the path); {} for a torchvision model. A batch job changes its directory, so
    the folder is said, absolute."""
    if arguments["model_factory"] is None:
        return {}
    from models.raised import AMPBENCH
    from models.user_import import users_module  # the user's path, as --model-factory reads it

    found = users_module(arguments["model_factory"].split(":")[0].split(".")[0])
    if found is None:
        return {}
    root = (found.parent.parent if found.name == "__init__.py" else found.parent).resolve()
    return {} if root == AMPBENCH else {"PYTHONPATH": str(root)}
