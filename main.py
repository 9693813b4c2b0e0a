"""ampbench: how much faster and smaller is mixed-precision training than FP32, and does accuracy hold?

    python main.py -n 200 -p --fp16 -s --model resnet50

Only argument parsing lives here, so that `-h` answers at once; torch is imported after it.
Each flag is a field of a RunConfig section (utils/config.py), and the spellings kept for old
scripts (the tutorial's --fp16 -s among them) are hidden flags from utils/spellings.py's table,
settled into the current settings after parsing.
"""
from __future__ import annotations

import argparse
import difflib
import sys
import traceback
from typing import Any, List, NoReturn, Optional, Sequence, Tuple

from utils import config, console, spellings
from utils.errors import UserError


class Parser(console.Parser):
    """console's parser, which reads a command line in its earlier spellings too (hidden flags,
    settled into the current settings by utils.spellings.resolve after parsing), lists them at the
    end of -h, and names the closest flag when one is mistyped (--loss-scaling, --channels_last)."""

    def parse_known_args(self, args: Optional[Sequence[str]] = None,  # type: ignore[override]
                         namespace: Optional[argparse.Namespace] = None) -> Tuple[argparse.Namespace, List[str]]:
        """Parse `args` into current settings; the namespace also holds `command`, the command line
        in current spellings, and `spelled` and `warnings` from the earlier ones."""
        args = sys.argv[1:] if args is None else list(args)
        try:
            parsed, extras = super().parse_known_args(args, namespace)
            spellings.resolve(parsed, args)
        except UserError as error:  # a rule between spellings: said as RunConfig's refusals are
            self.exit(2, f"{self.name}: error: {error}\n")
        return parsed, extras

    def format_help(self) -> str:
        formatter = self.formatter_class(prog=self.prog)
        formatter.start_section(spellings.TITLE)
        formatter.add_arguments([argparse.Action([row.typed], "", nargs=0, help=f"{row.current or '(nothing)'}: "
                                                 f"{row.origin}") for row in spellings.EARLIER])
        formatter.end_section()
        return super().format_help() + "\n" + formatter.format_help()

    def error(self, message: str) -> NoReturn:
        if message.startswith("unrecognized arguments:"):
            known = [flag for action in self._actions for flag in action.option_strings]
            typed = [word.split("=")[0] for word in message.split(":", 1)[1].split() if word.startswith("-")]
            close = [match for word in typed for match in
                     difflib.get_close_matches(word.replace("_", "-"), known, n=1, cutoff=0.7)
                     + difflib.get_close_matches(word, known, n=1, cutoff=0.7)
                     + [flag for flag in known if flag.startswith(word + "-")][:1]]  # a prefix is not taken
            if close:
                message += f"; did you mean {' or '.join(dict.fromkeys(close))}?"
        super().error(message)


class Spelled(argparse.Action):
    """Store a flag's value and the name it was typed under (-n or --steps; --warmup, the
    earlier spelling of --timing-warmup): the messages name the spelling the user typed
    (RunConfig.flag). A setting typed in both its spellings is refused."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: Optional[str] = None) -> None:
        spelled = getattr(namespace, "spelled", {})
        spellings.once(spelled.get(self.dest), str(option_string))
        setattr(namespace, self.dest, values)
        namespace.spelled = {**spelled, self.dest: option_string}


def build_parser() -> Parser:
    """The parser of every setting's flag (utils.config's SETTINGS: the sections' fields), in its
    -h group, with its default."""
    parser = Parser(
        "main.py", prog="python main.py",
        description="Benchmark FP32 against automatic mixed precision (FP16/BF16) training "
        "of a torchvision model on CIFAR-10, or your own model on your own images: step times, throughput, memory "
        "and accuracy.",
        epilog="Example: python main.py -n 200 -p --fp16 -s --model resnet50",
    )
    groups = {}
    for key, setting in config.SETTINGS.items():
        if setting.group not in groups:
            groups[setting.group] = parser.add_argument_group(setting.group)
        config.add_flag(groups[setting.group], key, action=setting.flag.action or Spelled)
    for earlier, current in spellings.RENAMED.items():  # hidden: -h lists the earlier spellings apart
        key = next(key for key, setting in config.SETTINGS.items() if setting.name == current)
        config.add_flag(parser, key, names=(earlier,), action=Spelled, help=argparse.SUPPRESS,
                        default=argparse.SUPPRESS)
    spellings.add_switches(parser)
    parser.set_defaults(**config.defaults())
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    from utils import children

    children.tie_this_process()  # a rank of a launch ampbench started dies with its launcher
    args = build_parser().parse_args(argv)
    from utils.errors import RankLost, WriteFailed
    from utils.stop import StopRequest

    with StopRequest() as stop:  # a signal from here on stops the run cleanly, even during `import torch`
        try:
            run_config = config.RunConfig.from_args(args)  # refuses bad combinations before torch is imported
            from utils import launch

            run_config.check_world(launch.detect().size)  # as each rank of the launch it runs in sees it
            if run_config.advice.from_results is not None:  # decides from saved results, its section alone: no torch
                from utils.advice import session
                return session.from_results(run_config.advice, stop)
            from utils import compat
            compat.check_versions()  # before importing code that needs the supported torch
            from utils import app  # which hands each stage the sections it reads

            if run_config.advice.advise:
                return app.advise(run_config, stop)
            return app.check_flags(run_config) if run_config.check_flags else app.run(run_config, stop)
        except (UserError, WriteFailed, RankLost) as error:  # WriteFailed: after training, nothing to retry
            return console.refused("main.py", error)


def command() -> int:
    """The installed `ampbench`, and `python main.py`: main() as every program runs it
    (console.run), then an end that no thread the user's code left running holds up (unheld)."""
    try:
        status = console.run("main.py", main)
    except Exception:  # a bug: its traceback, as Python prints it, and then the same end
        traceback.print_exc()
        status = 1
    return console.unheld("main.py", status)

if __name__ == "__main__":
    sys.exit(command())
