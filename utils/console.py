"""How every ampbench program talks to its user: stdout and stderr that never cost a result (a
reader that goes away, `main.py ... | head`, or a terminal that cannot show a character, an
ASCII-only locale and a non-ASCII path, must not end a run before its files are written), and
refusals that end alike in every program: `name: error: one sentence`, exit 2 (exit 1 for an
output that could not be written), never a traceback. The command-line entry points run
through run(), each as its program()."""
from __future__ import annotations

import argparse
import atexit
import functools
import os
import signal
import sys
import threading
import time
from typing import Any, Callable, List, NoReturn, Optional, TextIO

from utils import provenance
from utils.errors import UserError, WriteFailed, not_installed


class Guarded:
    """A text stream that, once its reader has closed the pipe, sends the rest to /dev/null
    instead of raising BrokenPipeError (which would also come back when Python flushes at exit);
    a stream that cannot be written otherwise (a full disk behind `> file`) goes quiet the same
    way and keeps the error, for run() to say at the end."""

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.failure: Optional[OSError] = None

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except OSError as error:
            self.silence(error)
            return len(text)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except OSError as error:
            self.silence(error)

    def silence(self, error: OSError) -> None:
        if not isinstance(error, BrokenPipeError):  # a reader that left asked for no more
            self.failure = self.failure or error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, self.stream.fileno())
        os.close(devnull)

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding, ... as the stream has them
        return getattr(self.stream, name)


def protect() -> None:
    """Wrap sys.stdout and sys.stderr: characters the terminal cannot show are escaped, and a
    stream that cannot be written goes quiet instead of stopping the program."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is None or isinstance(stream, Guarded):
            continue
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
        setattr(sys, name, Guarded(stream))


def one_line(text: str) -> str:
    """`text` as one line that shows what it holds: each character a terminal would act on or
    break the line at (control characters, escape sequences, line and paragraph separators)
    escaped as Python writes it, so that no field of a file can forge or hide a line."""
    return "".join(character if character.isprintable() else ascii(character)[1:-1] for character in text)


def refused(name: str, error: Exception) -> int:
    """Say `error` as program `name`'s one sentence; its exit status: 2 for a UserError (what
    the user can change), 1 for anything else (an output that failed)."""
    print(f"{name}: error: {error}", file=sys.stderr)
    return 2 if isinstance(error, UserError) else 1


def run(name: str, main: Callable[[], Optional[int]]) -> int:
    """Program `name`'s whole run: its streams protected, then main(); a UserError or
    WriteFailed that reaches here ends as refused() says; Ctrl-C or a SIGTERM (a scheduler's)
    that main() does not catch itself unwinds it, so that what it cleans up on the way is
    cleaned, and ends in one line and 128 + the signal's number; and a standard output that
    could not be written is said last (exit 1 where main() succeeded)."""
    protect()
    signals: List[int] = []

    def stop(number: int, frame: object) -> None:
        signals.append(number)
        raise KeyboardInterrupt

    previous = signal.getsignal(signal.SIGTERM)
    if previous == signal.SIG_DFL:  # one ignored on purpose (nohup) stays so
        signal.signal(signal.SIGTERM, stop)
    try:
        refuse_other_checkout()
        status = main() or 0
    except SystemExit as ended:  # argparse's -h and refusals
        status = ended.code if isinstance(ended.code, int) else int(ended.code is not None)
    except (UserError, WriteFailed) as error:
        status = refused(name, error)
    except ModuleNotFoundError as error:  # a program's work that needs torch, in a Python without it
        if error.name not in ("torch", "torchvision"):
            raise
        status = refused(name, UserError(not_installed(error.name)))
    except KeyboardInterrupt:
        number = signals[-1] if signals else signal.SIGINT
        print(f"{name}: stopped by {signal.Signals(number).name}.", file=sys.stderr)
        status = 128 + number
    finally:
        signal.signal(signal.SIGTERM, previous)
    sys.stdout.flush()  # what is still buffered fails now, not silently at exit
    failure = getattr(sys.stdout, "failure", None)
    if failure is not None:
        print(f"{name}: error: could not write the standard output ({failure.strerror or failure}), so what "
              "it printed there is cut short.", file=sys.stderr)
        status = status or 1
    return status


def refuse_other_checkout() -> None:
    """Refuse a program run by its path from a checkout whose code this Python does not import
    (provenance.other_checkout), before it measures anything with the other checkout's code."""
    started = getattr(sys.modules.get("__main__"), "__file__", None)
    other = provenance.other_checkout(started)
    if other is not None:
        raise UserError(f"{started} is in the checkout {other}, but this Python imports ampbench's code from "
                        f"{provenance.PROJECT_DIR} (installed there), so it would run that code and label it with "
                        f"this checkout's commit; run `pip install -e .` in {other} to use its code, or run the "
                        "program from the installed checkout.")


def program(name: str, main: Callable[[], Optional[int]]) -> Callable[[], int]:
    """Program `name` as a command that takes no arguments: what `python FILE` runs and what an
    installed console script (pyproject.toml's [project.scripts]) calls, run(name, main)."""
    return functools.partial(run, name, main)


THREADS_GRACE_S = 2.0  # what threads left running get to end by themselves once the program's work is done


def unheld(name: str, status: int) -> int:
    """`status`, once the threads that code the program ran started and left running (a user's
    model's module, --model-factory: Python waits for each at exit, forever for one that never
    ends) have had THREADS_GRACE_S to end; where some still run, program `name` says which, runs
    the exit handlers and ends the process now with `status`, without them."""
    left = [thread for thread in threading.enumerate() if thread is not threading.main_thread() and not thread.daemon]
    deadline = time.monotonic() + THREADS_GRACE_S
    for thread in left:
        thread.join(max(0.0, deadline - time.monotonic()))
    running = [thread.name for thread in left if thread.is_alive()]
    if not running:
        return status
    many = len(running) > 1
    print(f"{name}: note: its work is done, and code it ran left {len(running)} thread{'s' if many else ''} running "
          f"({', '.join(running)}), which Python would wait for; ending without {'them' if many else 'it'}.",
          file=sys.stderr)
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def shortened(text: str) -> str:
    """`text` as a refusal's sentence quotes what the user typed: cut short when long."""
    return text if len(text) <= 40 else text[:37] + "..."


class Parser(argparse.ArgumentParser):
    """argparse whose refusals are one line like the program's own: `name: error: message`,
    exit 2, saying how to list the flags (`prog` stays how the program is run, for -h: the
    installed command's name where one of pyproject.toml's scripts ran it)."""

    def __init__(self, name: str, **settings: Any):
        command = os.path.basename(sys.argv[0])
        if command.startswith("ampbench"):  # `ampbench -h` shows `usage: ampbench`, not `python main.py`
            settings["prog"] = command
        # a flag is taken as typed, never as the unique prefix of another (--timing for --timing-warmup)
        settings.setdefault("allow_abbrev", False)
        super().__init__(**settings)
        self.name = name

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.name}: error: {message} ({self.prog} -h lists the flags).\n")


def plural(count: Any, thing: str) -> str:
    """"1 worker", "2 workers": a count with its noun."""
    return f"{count} {thing}{'' if count == 1 else 's'}"


def human_bytes(count: Optional[float]) -> str:
    """A count of bytes as a reader takes it in: 951.4 MiB, 3.5 GiB ("-" for none)."""
    if count is None:
        return "-"
    for unit in ("B", "KiB", "MiB"):
        if count < 1024:
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} GiB"
