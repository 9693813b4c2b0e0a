"""ampbench: how much faster and smaller is mixed-precision training than FP32, and does accuracy hold?

    python main.py -n 200 -p --fp16 -s --model resnet50

Only argument parsing lives here, so that `-h` answers at once; torch is imported after it.
The flags themselves are described in utils/flags.py.
"""
from __future__ import annotations

import argparse
import difflib
import sys
from typing import Callable, NoReturn, Optional, Sequence, Union

from utils import config
from utils.flags import FLAGS


def in_range(name: str) -> Callable[[str], Union[int, float]]:
    """argparse's type for the flag of setting `name`: its range from utils.config, refused at
    parsing with the flag named (a non-number gets argparse's own "invalid int value")."""
    allowed = config.RANGES[name]

    def parse(text: str) -> Union[int, float]:
        value = allowed.kind(text)
        if not allowed.holds(value):
            raise argparse.ArgumentTypeError(f"must be {allowed.wording}, got {text}")
        return value

    parse.__name__ = allowed.kind.__name__
    return parse


class Parser(argparse.ArgumentParser):
    """argparse that names the closest flag when one is mistyped (--loss-scaling, --channels_last),
    under a one-line usage instead of the whole flag list."""

    def error(self, message: str) -> NoReturn:
        if message.startswith("unrecognized arguments:"):
            known = [flag for action in self._actions for flag in action.option_strings]
            typed = [word.split("=")[0] for word in message.split(":", 1)[1].split() if word.startswith("-")]
            close = [match for word in typed for match in
                     difflib.get_close_matches(word.replace("_", "-"), known, n=1, cutoff=0.7)
                     + difflib.get_close_matches(word, known, n=1, cutoff=0.7)]
            if close:
                message += f"; did you mean {' or '.join(dict.fromkeys(close))}?"
        self.exit(2, f"usage: {self.prog} [flags] (python {self.prog} -h lists them)\n{self.prog}: error: {message}\n")


def build_parser() -> Parser:
    """The parser of every flag in utils.flags, in its -h groups; defaults from utils.config."""
    parser = Parser(
        prog="main.py",
        description="Benchmark FP32 against automatic mixed precision (FP16/BF16) training "
        "of a torchvision model on CIFAR-10: step times, throughput, memory and accuracy.",
        epilog="Example: python main.py -n 200 -p --fp16 -s --model resnet50",
    )
    groups = {}
    for flag in FLAGS:
        if flag.group not in groups:
            groups[flag.group] = parser.add_argument_group(flag.group)
        settings = flag.argparse_settings()
        if flag.setting in config.RANGES:
            settings["type"] = in_range(flag.setting)
        groups[flag.group].add_argument(*flag.names, help=flag.help, **settings)
    parser.set_defaults(**config.defaults())
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    from utils.errors import RankLost, UserError, WriteFailed
    from utils.stop import StopRequest

    with StopRequest() as stop:  # a signal from here on stops the run cleanly, even during `import torch`
        try:
            run_config = config.RunConfig.from_args(args)  # refuses bad combinations before torch is imported
            if run_config.check_flags:  # what each rank of the launch it runs in would refuse too
                from utils import launch

                run_config.check_world(launch.detect().size)
                return 0
            from utils import compat
            compat.check_versions()  # before importing code that needs the supported torch
            from utils.app import run

            return run(run_config, stop)
        except (UserError, WriteFailed, RankLost) as error:  # WriteFailed: after training, nothing to retry
            print(f"main.py: error: {error}", file=sys.stderr)
            return 2 if isinstance(error, UserError) else 1


if __name__ == "__main__":
    from utils import console

    console.protect()
    sys.exit(main())
