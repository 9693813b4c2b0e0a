"""One lent GPU, one command: install the extras offline, run the suite's most wanted steps within
what the lease allows, stop in time to render, and pack the run into one archive that comes back.

    python3 benchmarks/lease.py --commit SHA      # on the lent GPU, in the copy of this checkout

A lent machine runs a command for at most --minutes (10) and returns only the files of $OUT (--out).
This script, in order:

1. installs the optional extras the figures need, torchao (the fp8 modes) and nvidia-ml-py (energy
   and the busy share), offline, from the wheels in --devdata's wheels/ (carried with the checkout;
   docs/benchmarks.md says how to fetch them), into a folder of its own on the suite's PYTHONPATH,
   never touching the machine's Python; without the wheels it says so and the suite skips what needs them;
2. gives benchmarks/gpu_suite.py a --budget of the minutes left before its stop, less the largest
   overrun a step estimated from measurements has had in the committed passes (suite.json's
   passes[].ran: estimate and time): the suite starts a step only while its estimate fits what is
   left, so a pass overruns its budget by its last step's overrun alone; the suite prints its plan;
3. stops the suite with SIGUSR1 (which ends the step in flight; that step waits for the next lease)
   at --minutes less RESERVE_S, which the suite's render of the run page and README and the pack need;
4. packs the run's folder, results/<device>/<date>/ with its lease.log, into $OUT/ampbench-lease-
   <device>-<date>.tar.gz (one file, within what comes back: 16 MiB). Unpacked beside the checkout,
   `python benchmarks/gpu_suite.py --render results/<device>/<date>` renders README from it.

A user error (no --out or $OUT, no commit where the copy has no .git, a bad number) exits 2 with
one sentence; the exit status is then the suite's (0; 1 where a step failed), or 0 when this
script's stop ended it, as planned; a stop signal to this script stops the suite the same way and
still packs, exiting 128 + its number.
"""
from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Dict, List, Optional, Tuple

from benchmarks.suite.folders import LEASE_LOG
from benchmarks.suite.slices import LEASE_MINUTES, RESERVE_S, committed_overrun, minutes
from utils import console, provenance
from utils.errors import UserError
from utils.fileio import atomic_write, ensure_folder_writable

NAME = "lease.py"
ROOT = Path(__file__).resolve().parents[1]
EXTRAS = ("requirements-fp8.txt", "requirements-energy.txt")  # what the suite's figures need beyond ampbench's own
ARCHIVE_BYTES = 16 * 2 ** 20  # the largest file a lent machine returns from $OUT


def install(wheels: Path) -> Optional[Path]:
    """The extras installed offline from `wheels` into a folder of their own (returned), or None,
    said, where there are no wheels or pip fails: the suite then skips what needs them."""
    if not wheels.is_dir() or not any(wheels.glob("*.whl")):
        say(f"no wheels in {wheels}: the fp8 modes and NVML's figures are skipped (docs/benchmarks.md fetches them)")
        return None
    site = Path(tempfile.mkdtemp(prefix="ampbench-lease-site-"))
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--find-links",
               str(wheels), "--target", str(site), *[part for name in EXTRAS for part in ("-r", str(ROOT / name))]]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if done.returncode:
        say(f"installing the extras failed ({done.stderr.strip().splitlines()[-1:] or done.returncode}): the suite "
            "skips what needs them")
        return None
    say(f"installed {', '.join(EXTRAS)} from {wheels}")
    return site


def say(line: str) -> None:
    print(f"{NAME}: {line}", flush=True)


def run_suite(argv: List[str], environment: Dict[str, str], log: IO[str], stop_at: float,
              end: float) -> Tuple[int, bool]:
    """Run the suite, its output to ours and to `log`; at `stop_at` (time.monotonic()) or at a stop
    signal to this process, send it SIGUSR1 and wait for it, killing it at `end` should it still
    run: (its exit status, whether we stopped it)."""
    suite = subprocess.Popen(argv, cwd=ROOT, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, bufsize=1)
    assert suite.stdout is not None

    def copy() -> None:
        for line in suite.stdout:  # type: ignore[union-attr]
            sys.stdout.write(line)
            sys.stdout.flush()
            log.write(line)

    reader = threading.Thread(target=copy, daemon=True)
    reader.start()
    stopped = False
    try:
        while suite.poll() is None:
            if not stopped and time.monotonic() >= stop_at:
                suite.send_signal(signal.SIGUSR1)
                stopped = True
            if time.monotonic() >= end:  # the lease's last seconds are the pack's
                suite.kill()
            time.sleep(0.2)
    except KeyboardInterrupt:  # a stop signal to this script (console.run): stop the suite alike, then pack
        suite.send_signal(signal.SIGUSR1)
        suite.wait()
        raise
    finally:
        reader.join(timeout=10)
    return suite.returncode, stopped


def run_folder(results_root: Path, since: float) -> Optional[Path]:
    """The run folder whose suite.json this lease wrote last (modified after `since`, wall time)."""
    found = [path for path in results_root.glob("*/*/suite.json") if path.stat().st_mtime >= since]
    return max(found, key=lambda path: path.stat().st_mtime).parent if found else None


def pack(folder: Path, out: Path) -> Path:
    """The run folder as one archive in `out`, its members named from the results root's parent
    (results/<device>/<date>/...), without hidden files (the CSV writer's lock)."""
    base = folder.parent.parent.parent
    archive = out / f"ampbench-lease-{folder.parent.name}-{folder.name}.tar.gz"

    def write(file: IO[bytes]) -> None:
        with tarfile.open(fileobj=file, mode="w:gz") as tar:
            for path in sorted(folder.rglob("*")):
                if path.is_file() and not any(part.startswith(".") for part in path.relative_to(folder).parts):
                    tar.add(path, arcname=str(path.relative_to(base)), recursive=False)

    atomic_write(str(archive), write)
    return archive


def lease_minutes(text: str) -> float:
    """--minutes: more than twice what the stop keeps back, and no more than a day."""
    found = minutes(text)
    if not 2 * RESERVE_S / 60 < found <= 24 * 60:
        raise argparse.ArgumentTypeError(f"takes the lease's minutes, more than {2 * RESERVE_S / 60:g} and at most a "
                                         f"day's, not {text!r}")
    return found


def packed(folder: Optional[Path], log: str, out: Path, started: float) -> None:
    """The run's folder, with the suite's output as its lease.log, packed into `out`, and said."""
    if folder is None:
        say("the suite wrote no run folder: nothing to pack")
        return
    (folder / LEASE_LOG).write_text(log)
    archive = pack(folder, out)
    size = archive.stat().st_size
    say(f"packed {folder} into {archive} ({size / 2 ** 20:.1f} MiB"
        + (f", over the {ARCHIVE_BYTES // 2 ** 20} MiB a lent machine returns: it will not come back)"
           if size > ARCHIVE_BYTES else ")") + f"; the lease took {(time.monotonic() - started) / 60:.1f} min")


def build_parser() -> argparse.ArgumentParser:
    parser = console.Parser(NAME, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--commit", help="the commit of the code that runs, as `git rev-parse HEAD` prints it where "
                        "the checkout was copied from (a lent machine's copy has no .git)")
    parser.add_argument("--out", help="where the archive goes: the folder a lent machine returns (default $OUT)")
    parser.add_argument("--minutes", type=lease_minutes, default=LEASE_MINUTES, help="how long the lease's command "
                        "may run (default %(default)g)")
    parser.add_argument("--devdata", default=str(ROOT / ".devdata"), help="the carried folder with wheels/ and "
                        "cifar-10-batches-py/ (default .devdata)")
    parser.add_argument("--results-root", default=str(ROOT / "results"), help="gpu_suite.py's --results-root")
    parser.add_argument("--readme", default=str(ROOT / "README.md"), help="gpu_suite.py's --readme")
    return parser


def main() -> int:
    started, wall = time.monotonic(), time.time()
    options = build_parser().parse_args()
    out = options.out or os.environ.get("OUT")
    if not out:
        raise UserError("no folder to pack into: give --out, or run where $OUT names the folder that comes back.")
    ensure_folder_writable(out, "--out")
    commit = options.commit or provenance.commit()[0]
    if commit is None or not provenance.is_commit(commit):
        raise UserError("no commit names the code that runs: give --commit with what `git rev-parse HEAD` prints in "
                        "the checkout this copy was made from.")
    devdata, results_root = Path(options.devdata), Path(options.results_root)
    site = install(devdata / "wheels")
    overrun, history = committed_overrun(results_root)
    stop_at = started + 60 * options.minutes - RESERVE_S
    budget = (stop_at - time.monotonic() - overrun) / 60
    say(f"{history}; the suite gets --budget {budget:.2f} and is stopped {RESERVE_S:g} s before the "
        f"{options.minutes:g}-minute lease ends")
    data = devdata / "cifar-10-batches-py"
    argv = [sys.executable, str(ROOT / "benchmarks" / "gpu_suite.py"), "--budget", f"{budget:.2f}", "--commit",
            commit, "--results-root", str(results_root), "--readme", options.readme,
            *(["--data-dir", str(data)] if data.is_dir() else [])]
    paths = [str(path) for path in (site, ROOT) if path] + [os.environ.get("PYTHONPATH", "")]
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(path for path in paths if path))
    say("+ " + shlex.join(argv))
    with tempfile.TemporaryFile("w+") as log:
        try:
            status, stopped = run_suite(argv, environment, log, stop_at, stop_at + RESERVE_S / 2)
        finally:
            log.seek(0)
            packed(run_folder(results_root, wall), log.read(), Path(out), started)
    if stopped and status == 128 + signal.SIGUSR1:
        return 0
    return status


command = console.program(NAME, main)

if __name__ == "__main__":
    sys.exit(command())
