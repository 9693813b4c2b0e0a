"""--model-factory's MODULE:FUNCTION, read without torch: for the checks of the flags
(utils/config.py) before torch is imported, and for the import of the user's model (user.py)."""
from __future__ import annotations

import re
from pathlib import PurePath
from typing import Tuple

from utils.console import shortened
from utils.errors import UserError

# a dotted module path as `import` takes it, then the dotted path of a callable in it (a function,
# a class, a class's staticmethod); each name one of Python's identifiers: a letter or _ (of any
# alphabet), then letters, digits or _
DOTTED = r"[^\W\d]\w*(?:\.[^\W\d]\w*)*"
FACTORY_SPEC = re.compile(rf"({DOTTED}):({DOTTED})")


def factory_spec(spec: str) -> Tuple[str, str]:
    """(module, attribute path) of --model-factory's MODULE:FUNCTION, or a refusal that shows the
    form (with the module to give where a file was given: m.py:tiny is m:tiny)."""
    match = FACTORY_SPEC.fullmatch(spec)
    file, _, function = spec.rpartition(":")
    path = PurePath(file)
    if path.suffix == ".py" and path.stem.isidentifier() and re.fullmatch(DOTTED, function):
        folder = "the folder that holds it" if str(path.parent) == "." else str(path.parent)
        raise UserError(f"--model-factory takes the module as `import` names it, not a file: for {shortened(file)} "
                        f"give --model-factory {path.stem}:{function}, run from {folder} or with that folder on "
                        "PYTHONPATH.")
    if match is None:
        raise UserError(f"--model-factory takes MODULE:FUNCTION, the module as `import` names it and a function or "
                        f"class in it, e.g. mymodels:build_net; got '{shortened(spec)}'.")
    return match.group(1), match.group(2)
