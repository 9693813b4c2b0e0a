"""Pickles read without running code: an unpickler that rebuilds only the globals it is given
and refuses any other, so a crafted file cannot execute anything while it is read."""
import pickle
import types


def unpickler(allowed):
    """A pickle.Unpickler class that resolves only the (module, name) keys of `allowed`."""

    class RestrictedUnpickler(pickle.Unpickler):
        def find_class(self, module, name):
            if (module, name) in allowed:
                return allowed[(module, name)]
            raise pickle.UnpicklingError(f"refusing to load '{module}.{name}'")

    return RestrictedUnpickler


def pickle_module(allowed):
    """A stand-in for the pickle module (what torch.load's pickle_module= takes) whose
    Unpickler and load are restricted to `allowed`."""
    module = types.ModuleType("restricted_pickle")
    module.Unpickler = unpickler(allowed)
    module.load = lambda file, **options: module.Unpickler(file, **options).load()
    return module
