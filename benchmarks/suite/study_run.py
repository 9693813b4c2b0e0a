"""One study's process of the suite (a script of benchmarks/: overhead.py, loader.py,
fp8_sweep.py) as a typed value: its options by the names its own parser keeps them under, in the
order its command line types them. Its command line is rendered from them through that parser's
flags, and the estimator reads the options from the same value (options()), never by parsing
the words back. No torch: a study's parser imports none."""
from __future__ import annotations

import argparse
import dataclasses
import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, List, Tuple

from benchmarks.suite.main_run import PYTHON, ROOT, moved_settings, settings_of

# How the suite's study commands type these flags, as a user does (-p, -b); the rest by their first long name
SHORT = {"gpu": "-p", "batch_size": "-b"}


@dataclass(frozen=True)
class StudyRun:
    """The study `script` (its file name in benchmarks/) with `settings` ((its parser's name for
    an option, the value), in the order typed), started by this interpreter."""
    script: str
    settings: Tuple[Tuple[str, Any], ...]

    def parser(self) -> argparse.ArgumentParser:
        module = importlib.import_module(f"benchmarks.{Path(self.script).stem}")
        parser: argparse.ArgumentParser = module.build_parser()
        return parser

    def argv(self) -> Tuple[str, ...]:
        """The command line, as a user would type it."""
        actions = {action.dest: action for action in self.parser()._actions}
        words: List[str] = []
        for key, value in self.settings:
            names = actions[key].option_strings
            name = SHORT.get(key) or next(name for name in names if name.startswith("--"))
            if isinstance(value, bool):  # a switch: typed where on
                words += [name] if value else []
            else:
                words += [name, ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)]
        return (PYTHON, str(ROOT / "benchmarks" / self.script), *words)

    def options(self) -> argparse.Namespace:
        """The options the study runs with: its parser's defaults, and these settings."""
        return argparse.Namespace(**{**vars(self.parser().parse_args([])), **dict(self.settings)})

    def moved(self, old: Path, new: Path) -> StudyRun:
        """This run writing into `new` instead of `old`."""
        return dataclasses.replace(self, settings=moved_settings(self.settings, old, new))


def study_run(script: str, **settings: Any) -> StudyRun:
    """The study `script` with `settings` in the order given, each path as the text it reads."""
    return StudyRun(script, settings_of(settings))
