"""One main.py process of the suite as a typed value: its settings by utils/config.py's keys, in
the order its command line types them, and how it types each flag where that is not the flag's
first name. Its command line is rendered from it (utils/config.flag_words, as --advise renders
its phases), never typed by hand, and the estimator reads its runs from the same value
(RunConfig.build), never by parsing the words back. No torch."""
from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from utils import config

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
# How the suite's commands type these flags, as a user does (-p, -m, -b, -n); the rest by their first name
SHORT = {"gpu": "-p", "model": "-m", "batch_size": "-b", "steps": "-n"}


@dataclass(frozen=True)
class MainRun:
    """main.py's `settings` ((key, value), in the order typed), the flag each key is typed as where
    not its first name (`spelled`: another of its names, or an earlier spelling such as the
    tutorial's --fp16 -s), and the `launcher` words before main.py (the interpreter, torchrun)."""
    settings: Tuple[Tuple[str, Any], ...]
    spelled: Tuple[Tuple[str, str], ...] = ()
    launcher: Tuple[str, ...] = (PYTHON,)

    def argv(self) -> Tuple[str, ...]:
        """The command line, as a user would type it."""
        spelled = dict(self.spelled)
        words = [word for key, value in self.settings for word in config.flag_words(key, value, spelled.get(key))]
        return (*self.launcher, str(ROOT / "main.py"), *words)

    def values(self) -> Dict[str, Any]:
        return dict(self.settings)

    def config(self) -> config.RunConfig:
        """The run's config, as main.py builds it from this command line."""
        return config.RunConfig.build(spelled=dict(self.spelled), **self.values())

    def with_settings(self, **settings: Any) -> MainRun:
        """This run with `settings` typed after its own (a flag it has keeps its place)."""
        return dataclasses.replace(self, settings=settings_of({**self.values(), **settings}))

    def moved(self, old: Path, new: Path) -> MainRun:
        """This run writing into `new` instead of `old`."""
        return dataclasses.replace(self, settings=moved_settings(self.settings, old, new))


def moved_settings(settings: Tuple[Tuple[str, Any], ...], old: Path, new: Path) -> Tuple[Tuple[str, Any], ...]:
    """`settings` with each path under `old` under `new` instead."""
    return tuple((key, value.replace(str(old), str(new)) if isinstance(value, str) else value)
                 for key, value in settings)


def settings_of(settings: Dict[str, Any]) -> Tuple[Tuple[str, Any], ...]:
    """`settings` in order, each path as the text main.py reads."""
    return tuple((key, str(value) if isinstance(value, Path) else value) for key, value in settings.items())


def main_run(spelled: Optional[Dict[str, str]] = None, /, **settings: Any) -> MainRun:
    """A main.py run with `settings` in the order given, typed with the suite's short flags (SHORT)
    but where `spelled` says otherwise, started by this interpreter."""
    typed: List[Tuple[str, str]] = [(key, name) for key, name in {**SHORT, **(spelled or {})}.items()
                                    if key in settings]
    return MainRun(settings_of(settings), tuple(typed))
