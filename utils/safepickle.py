"""Pickles read without running code: an unpickler that rebuilds only the globals it is given
and refuses any other, so a crafted file cannot execute anything while it is read."""
from __future__ import annotations

import pickle
import types
from typing import TYPE_CHECKING, Any, Callable, Dict, Tuple, Type

if TYPE_CHECKING:
    # {(module, name): the class or function a pickle may rebuild under that name}
    Allowed = Dict[Tuple[str, str], Callable[..., Any]]


def unpickler(allowed: Allowed) -> Type[pickle.Unpickler]:
    """A pickle.Unpickler class that resolves only the (module, name) keys of `allowed`."""

    class RestrictedUnpickler(pickle.Unpickler):
        def find_class(self, module: str, name: str) -> Callable[..., Any]:
            if (module, name) in allowed:
                return allowed[(module, name)]
            raise pickle.UnpicklingError(f"refusing to load '{module}.{name}'")

    return RestrictedUnpickler


class PickleModule(types.ModuleType):
    """A module with the two names torch.load reads of its pickle_module=."""
    Unpickler: Type[pickle.Unpickler]
    load: Callable[..., Any]


def pickle_module(allowed: Allowed) -> types.ModuleType:
    """A stand-in for the pickle module (what torch.load's pickle_module= takes) whose
    Unpickler and load are restricted to `allowed`."""
    module = PickleModule("restricted_pickle")
    module.Unpickler = unpickler(allowed)
    module.load = lambda file, **options: module.Unpickler(file, **options).load()
    return module
