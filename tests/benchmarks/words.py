"""A process a test hands the suite by its words alone (python -c CODE, or none at all), in place of
a main.py or study run: what plan.Program asks of a command, its command line and where it writes."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Tuple


@dataclass(frozen=True)
class Words:
    words: Tuple[str, ...] = ()

    def argv(self) -> Tuple[str, ...]:
        return self.words

    def moved(self, old: Path, new: Path) -> Words:
        return Words(tuple(word.replace(str(old), str(new)) for word in self.words))
