"""The one exception type that means "the user asked for something we cannot do"."""


class UserError(Exception):
    """A bad flag, missing data or an unusable file: main.py prints the message and exits 2."""
