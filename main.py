"""ampbench: how much faster and smaller is mixed-precision training than FP32, and does accuracy hold?

    python main.py -n 200 -p --fp16 -s --model resnet50

Only argument parsing lives here, so that `-h` answers at once; torch is imported after it.
The flags themselves are described in utils/flags.py.
"""
from __future__ import annotations

import argparse
import difflib
import sys
from typing import Any, NoReturn, Optional, Sequence

from utils import config, console
from utils.flags import FLAGS


class Parser(console.Parser):
    """console's parser, which names the closest flag when one is mistyped (--loss-scaling,
    --channels_last)."""

    def error(self, message: str) -> NoReturn:
        if message.startswith("unrecognized arguments:"):
            known = [flag for action in self._actions for flag in action.option_strings]
            typed = [word.split("=")[0] for word in message.split(":", 1)[1].split() if word.startswith("-")]
            close = [match for word in typed for match in
                     difflib.get_close_matches(word.replace("_", "-"), known, n=1, cutoff=0.7)
                     + difflib.get_close_matches(word, known, n=1, cutoff=0.7)]
            if close:
                message += f"; did you mean {' or '.join(dict.fromkeys(close))}?"
        super().error(message)


class Spelled(argparse.Action):
    """Store a flag's value and the name it was typed under, for a flag of several names
    (--timing-warmup and its earlier --warmup, -n and --steps): the messages name the
    spelling the user typed (RunConfig.flag)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: Optional[str] = None) -> None:
        setattr(namespace, self.dest, values)
        namespace.spelled = {**getattr(namespace, "spelled", {}), self.dest: option_string}


def build_parser() -> Parser:
    """The parser of every flag in utils.flags, in its -h groups; defaults from utils.config."""
    parser = Parser(
        "main.py", prog="python main.py",
        description="Benchmark FP32 against automatic mixed precision (FP16/BF16) training "
        "of a torchvision model on CIFAR-10, or your own model on your own images: step times, throughput, memory "
        "and accuracy.",
        epilog="Example: python main.py -n 200 -p --fp16 -s --model resnet50",
    )
    groups = {}
    for flag in FLAGS:
        if flag.group not in groups:
            groups[flag.group] = parser.add_argument_group(flag.group)
        settings = flag.argparse_settings()
        if flag.action is None and len(flag.names) > 1:
            settings["action"] = Spelled
        if flag.setting in config.RANGES:
            settings["type"] = config.flag_type(config.RANGES[flag.setting])
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
            from utils import launch

            run_config.check_world(launch.detect().size)  # as each rank of the launch it runs in sees it
            if run_config.advice.from_results is not None:  # decides from saved results: no torch
                from utils.advice import session
                return session.from_results(run_config, stop)
            from utils import compat
            compat.check_versions()  # before importing code that needs the supported torch
            from utils import app

            if run_config.advice.advise:
                from utils.advice import session
                return session.advise(run_config, stop)
            return app.check_flags(run_config) if run_config.check_flags else app.run(run_config, stop)
        except (UserError, WriteFailed, RankLost) as error:  # WriteFailed: after training, nothing to retry
            return console.refused("main.py", error)


command = console.program("main.py", main)  # the installed `ampbench`

if __name__ == "__main__":
    sys.exit(command())
