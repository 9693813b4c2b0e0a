"""stdout and stderr that never cost a result: a reader that goes away (`main.py ... | head`)
or a terminal that cannot show a character (an ASCII-only locale and a non-ASCII path) must
not end a run before its files are written. The command-line entry points call protect()."""
from __future__ import annotations

import os
import sys
from typing import Any, TextIO


class QuietWhenReaderGone:
    """A text stream that, once its reader has closed the pipe, sends the rest to /dev/null
    instead of raising BrokenPipeError (which would also come back when Python flushes at exit)."""

    def __init__(self, stream: TextIO):
        self.stream = stream

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except BrokenPipeError:
            self.silence()
            return len(text)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except BrokenPipeError:
            self.silence()

    def silence(self) -> None:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, self.stream.fileno())
        os.close(devnull)

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding, ... as the stream has them
        return getattr(self.stream, name)


def protect() -> None:
    """Wrap sys.stdout and sys.stderr: characters the terminal cannot show are escaped, and a
    closed pipe silences the stream instead of stopping the program."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is None or isinstance(stream, QuietWhenReaderGone):
            continue
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
        setattr(sys, name, QuietWhenReaderGone(stream))
