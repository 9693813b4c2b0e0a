"""--model-factory's MODULE:FUNCTION, read without torch: for the checks of the flags
(utils/config.py) before torch is imported, and for the import of the user's model (user.py)."""
from __future__ import annotations

import re
from typing import Tuple

from utils.console import shortened
from utils.errors import UserError

# a dotted module path as `import` takes it, then the dotted path of a callable in it (a function,
# a class, a class's staticmethod); each name one of Python's identifiers: a letter or _ (of any
# alphabet), then letters, digits or _
DOTTED = r"[^\W\d]\w*(?:\.[^\W\d]\w*)*"
FACTORY_SPEC = re.compile(rf"({DOTTED}):({DOTTED})")


def factory_spec(spec: str) -> Tuple[str, str]:
    """(module, attribute path) of --model-factory's MODULE:FUNCTION, or a refusal that shows the form."""
    match = FACTORY_SPEC.fullmatch(spec)
    if match is None:
        raise UserError(f"--model-factory takes MODULE:FUNCTION, the module as `import` names it and a function or "
                        f"class in it, e.g. mymodels:build_net; got '{shortened(spec)}'.")
    return match.group(1), match.group(2)
