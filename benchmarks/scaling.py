"""Does the AMP speedup survive many GPUs? The scaling study in one command.

    python benchmarks/scaling.py -p --out study -- -m resnet50 -n 200 -b 128 --data-dir DIR
    python benchmarks/scaling.py -p --out study --grad-comm fp32,bf16 --rounds 3 -- -m resnet50 -n 200
    python benchmarks/scaling.py --world-sizes 1,2 --out study -- -m resnet18 -n 20 -b 16   # CPU, a check

Launches main.py with torchrun for each world size (1, 2, 4, ... up to the GPUs visible, or
--world-sizes), each --grad-comm and each round, at the same per-process batch (weak scaling),
every mode of --modes in each launch with --explain; then merges the launches' result files into
one table, scaling.json and scaling.png under --out (utils/results/scaling.py: images/s,
scaling efficiency with its 95% interval, the AMP speedup at each size, the exposed
communication share). Flags after `--` go to every launch of main.py, checked by main.py's own
--check-flags before the first launch. Rounds interleave the world sizes; with --rounds 3 the
intervals rest on the launches' medians.

A stop signal (Ctrl-C, a scheduler's SIGTERM, SIGHUP, SIGUSR1) goes to the launch in flight,
which saves and ends as main.py does; the study then writes the table of the launches that
finished and exits 128 + the signal's number; a second signal kills the launch, torchrun and its
ranks, at once. The same command again continues the study: the launches already finished in
--out are kept and not run again.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from utils import config, console, modes, spellings  # none imports torch
from utils.children import POLL_S, Child, signal_pid
from utils.errors import UserError, WriteFailed
from utils.grad_comm import GRAD_COMM
from utils.stop import StopRequest

ROOT = Path(__file__).resolve().parents[1]


def owned_settings(names, result=None, comm=None):
    """main.py's settings the study sets itself in every launch: the modes, --explain, the results
    file and, on two or more ranks, --grad-comm (None: not set in this launch)."""
    return {"modes": names, "explain": True, "json": result, "grad_comm": comm}


# The flags of those settings, and those that choose the modes another way (--compare, the tutorial's --fp16 ...)
OWN_FLAGS = {name for key in owned_settings(None) for name in config.SETTINGS[key].flag.names} | {
    *config.SETTINGS["compare"].flag.names, *spellings.CHOOSERS}
MOST_ROUNDS = 100  # launches of each point; more would outlast any allocation
PLAN = "plan.json"  # in --out: what the study launches, so that the same command continues it


def parse(argv):
    parser = console.Parser("scaling.py", prog="python benchmarks/scaling.py", description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="folder for the launches' results and logs, the table, "
                        "scaling.json and scaling.png")
    parser.add_argument("-p", "--gpu", action="store_true", help="one process per GPU (default: CPU processes)")
    parser.add_argument("--world-sizes", metavar="LIST", help="comma list of ranks, 1 among them (default with -p: "
                        "1, 2, 4, ... up to the GPUs visible; required on the CPU)")
    parser.add_argument("--modes", help="comma list of precision modes (default: main.py --compare's)")
    parser.add_argument("--grad-comm", default="fp32", metavar="LIST",
                        help=f"comma list from {', '.join(GRAD_COMM)} (default fp32)")
    parser.add_argument("--rounds", type=int, default=1, help="run every launch this many times, interleaved")
    parser.add_argument("--from", dest="from_dir", metavar="DIR",
                        help="launch nothing: merge the result files already in DIR (a job script's study, "
                        "cluster/stages.sh with STUDY=1)")
    parser.add_argument("main_flags", nargs=argparse.REMAINDER, help="-- then main.py's flags")
    options = parser.parse_args(argv)
    options.main_flags = options.main_flags[1:] if options.main_flags[:1] == ["--"] else options.main_flags
    return options


def world_sizes(asked, gpu, visible):
    """The world sizes to run, checked: 1 among them, none above the GPUs visible."""
    if asked is None and not gpu:
        raise UserError("on the CPU give --world-sizes (e.g. 1,2): CPU processes share the cores, so there are no "
                        "devices to count.")
    if asked is None:
        if visible < 2:
            raise UserError(f"{visible} GPU is visible, so there is nothing to scale to: the study needs 2 or more.")
        sizes = [2 ** power for power in range(visible.bit_length()) if 2 ** power <= visible]
        return sizes + ([visible] if visible not in sizes else [])
    try:
        sizes = sorted({int(text) for text in asked.split(",")})
    except ValueError:
        raise UserError(f"--world-sizes is a comma list of whole numbers, e.g. 1,2,4; got {asked}.") from None
    if 1 not in sizes or len(sizes) < 2 or sizes[0] < 1:
        raise UserError(f"--world-sizes needs 1 (the baseline) and at least one larger size; got {asked}.")
    if gpu and sizes[-1] > visible:
        raise UserError(f"--world-sizes asks for {sizes[-1]} ranks and {visible} GPUs are visible; one rank per GPU.")
    cores = os.cpu_count() or 1
    if not gpu and sizes[-1] > cores:
        raise UserError(f"--world-sizes asks for {sizes[-1]} CPU processes and this machine has {cores} cores; "
                        f"on the CPU give sizes up to {cores}.")
    return sizes


def checked(options, visible):
    """The study's plan: (world sizes, modes, grad comms), every input refused in one sentence."""
    sizes = world_sizes(options.world_sizes, options.gpu, visible)
    names = options.modes or ",".join(modes.DEFAULT_COMPARE if options.gpu else modes.DEFAULT_COMPARE_CPU)
    modes.parse_modes(names)  # refuses unknown modes
    comms = options.grad_comm.split(",")
    if not set(comms) <= set(GRAD_COMM) or len(set(comms)) != len(comms):
        raise UserError(f"--grad-comm is a comma list from {', '.join(GRAD_COMM)}, each once; got {options.grad_comm}.")
    if not 1 <= options.rounds <= MOST_ROUNDS:
        raise UserError(f"--rounds must be from 1 to {MOST_ROUNDS}; got {options.rounds}.")
    taken = [typed for typed in (word.split("=")[0] for word in options.main_flags) if typed in OWN_FLAGS]
    if taken:
        raise UserError(f"{taken[0]} is set by the study in every launch; give it to scaling.py or drop it.")
    return sizes, names, comms


def check_main_flags(options, names, sizes, comms):
    """Run main.py's own check of the flags each launch gets, as one of its ranks (torchrun's
    variables set), before the first launch: a flag main.py refuses is refused now, with
    main.py's sentence, instead of after a launch."""
    for ranks, comm in [(1, None)] + [(sizes[-1], comm) for comm in comms]:
        command = [sys.executable, str(ROOT / "main.py"), *launch_flags(options, names, comm=comm), "--check-flags"]
        checked_run = subprocess.run(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                     env={**os.environ, "WORLD_SIZE": str(ranks), "RANK": "0"})
        if checked_run.returncode < 0:  # a stop signal ended the check, and the study stops
            return
        if checked_run.returncode != 0:
            said = [line for line in checked_run.stderr.splitlines() if line.strip()]
            reason = said[-1].split("error: ", 1)[-1] if said else f"it exits with status {checked_run.returncode}"
            raise UserError(f"main.py refuses the flags the study would launch it with: {reason}")


def launch_flags(options, names, result=None, comm=None):
    """The flags a launch gives main.py: the user's, then the study's, its results file `result`
    and its --grad-comm `comm` where it has them."""
    owned = [word for key, value in owned_settings(names, result, comm).items() if value is not None
             for word in config.flag_words(key, value)]
    return [*options.main_flags, *(["-p"] if options.gpu else []), *owned, "--no-progress"]


def launches(sizes, comms, rounds):
    """(round, ranks, grad comm) in order: each round runs every size once per --grad-comm (one
    process once: nothing travels), so that a slow spell of the machine touches every size."""
    return [(number, size, comm) for number in range(1, rounds + 1) for size in sizes
            for comm in (comms if size > 1 else [None])]


def launch_name(plan):
    number, size, comm = plan
    return f"round{number}-ranks{size}" + (f"-{comm}" if comm else "")


def launch(out, plan, names, options, stop):
    """Run one launch of main.py under torchrun, in a process group of its own that `stop`
    forwards signals to; returns its results file and what ran, or None when a stop signal
    ended it before it finished."""
    number, size, comm = plan
    name = launch_name(plan)
    result, log = out / f"{name}.json", out / "logs" / f"{name}.log"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={size}",
               str(ROOT / "main.py"), *launch_flags(options, names, str(result), comm)]
    started = time.monotonic()
    with open(log, "w") as output:
        # A session of its own: Ctrl-C reaches the study alone, which forwards it once to torchrun
        # (torchrun passes it on to its ranks); a signal the ranks got twice would end them unsaved.
        child = stop.launch = Child(command, output, cwd=str(ROOT))
        try:
            while not child.exited():
                time.sleep(POLL_S)
        except SystemExit:  # a second stop signal ended the launch: what it saved before is partial
            set_aside(out, name)
            raise
        finally:
            stop.launch = None
            status = child.finish()
    if stop.requested:
        set_aside(out, name)
        return None
    if status != 0:
        raise WriteFailed(f"the launch on {size} ranks{f' (--grad-comm {comm})' if comm else ''} failed with exit "
                          f"status {status}: its output is in {log}, and the launches finished before it are in "
                          f"{out}; the same command continues the study from there.")
    print(f"  {name}: {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    return result, {"command": command, "json": str(result), "log": str(log), "seconds": time.monotonic() - started}


def set_aside(out, name):
    """Move an interrupted launch's partial results to logs/, where no study takes them as a point."""
    if (out / f"{name}.json").exists():
        os.replace(out / f"{name}.json", out / "logs" / f"{name}.interrupted.json")


class StudyStop(StopRequest):
    """The study's stop signals: the first is forwarded to the launch in flight, which saves and
    ends, and no launch starts after it; a second ends the launch and the study at once."""

    def __init__(self):
        super().__init__()
        self.launch = None

    def handler(self, number, frame):
        if self.requested:
            if self.launch is not None:  # torchrun's group and its ranks, each in a session of its own
                self.launch.finish()
            print(f"scaling.py: a second signal ({signal.Signals(number).name}) arrived: stopping now; the "
                  "finished launches' files are kept.", file=sys.stderr, flush=True)
            sys.exit(128 + number)
        self.signal_number, self.signal_name = number, signal.Signals(number).name
        print(f"scaling.py: {self.signal_name} received: stopping the launch in flight, then writing the table of "
              "the finished ones.", file=sys.stderr, flush=True)
        if self.launch is not None:
            signal_pid(self.launch.pid, number)


def finished_launch(out, plan):
    """The results file of `plan`'s launch when an earlier run of this study finished it, else None."""
    from utils.results.merge import load_result

    result = out / f"{launch_name(plan)}.json"
    if not result.exists():
        return None
    try:
        documents = load_result(str(result))
    except UserError:
        return None
    return result if not any(document.get("incomplete") for document in documents) else None


def check_plan(out, plan):
    """Record what this study launches in --out, or refuse a folder that holds another study."""
    from utils import fileio

    path = out / PLAN
    if path.exists():
        try:
            earlier = json.loads(path.read_text())
        except (OSError, ValueError):
            earlier = None
        if earlier != plan:
            raise UserError(f"--out {out} holds another study (its {PLAN} asks for other launches); give another "
                            "--out, or the same flags to continue that study.")
        return
    fileio.atomic_write(str(path), lambda f: f.write(json.dumps(plan, indent=1).encode()))


def visible_gpus(gpu):
    if not gpu:
        return 0
    import torch
    return torch.cuda.device_count()


def run(options, stop):
    """Check everything, launch every run not finished yet, then merge, print and write the study."""
    from utils import fileio
    from utils.results import plot

    out = Path(options.out)
    if options.from_dir:
        found = sorted(path for path in Path(options.from_dir).glob("*.json")
                       if path.name not in ("scaling.json", PLAN))
        if not found:
            raise UserError(f"--from {options.from_dir} holds no result files (*.json) of main.py.")
        fileio.ensure_folder_writable(str(out), "--out")
        plot.check_available(str(out / "scaling.png"))
        return finish(out, found, [])
    sizes, names, comms = checked(options, visible_gpus(options.gpu))
    fileio.ensure_folder_writable(str(out), "--out")
    plot.check_available(str(out / "scaling.png"))
    check_main_flags(options, names, sizes, comms)
    plans = launches(sizes, comms, options.rounds)
    if stop.requested:
        return stopped(out, [], [], len(plans), stop.signal_number)
    check_plan(out, {"main_flags": launch_flags(options, names), "world_sizes": sizes, "grad_comm": comms,
                     "rounds": options.rounds})
    (out / "logs").mkdir(parents=True, exist_ok=True)
    earlier = {plan: finished_launch(out, plan) for plan in plans}
    kept = [result for result in earlier.values() if result]
    print(f"scaling study: {len(plans)} launches of {names} on {', '.join(map(str, sizes))} ranks"
          + (f" ({len(kept)} finished before, kept)" if kept else ""), file=sys.stderr)
    results, ran = list(kept), [{"json": str(result), "finished_before": True} for result in kept]
    for plan in plans:
        if earlier[plan] or stop.requested:
            continue
        done = launch(out, plan, names, options, stop)
        if done:
            results.append(done[0])
            ran.append(done[1])
    if stop.requested:
        return stopped(out, results, ran, len(plans), stop.signal_number)
    return finish(out, results, ran)


def stopped(out, results, ran, planned, number):
    """After a stop signal: the table of the finished launches when they make one, and one line
    saying what was kept and how to go on; exits 128 + the signal's number."""
    table = "no table yet (it needs the 1-process launch and a larger one)"
    try:
        finish(out, results, ran)
        table = f"their table in {out / 'scaling.json'}"
    except UserError:
        pass
    print(f"scaling.py: stopped by {signal.Signals(number).name} after {len(results)} of {planned} launches: kept "
          f"their results in {out} and {table}; run the same command again to run the other {planned - len(results)}.",
          file=sys.stderr, flush=True)
    return 128 + number


def finish(out, results, ran):
    """The table on stdout; scaling.json and scaling.png under `out`."""
    from utils.results import scaling
    from utils.results.files import write_json
    from utils.results.merge import load_result
    from utils.results.record import setup_of
    from utils.results.summary import describe

    documents = [document for path in results for document in load_result(str(path))]
    rows = scaling.study(documents)
    base = next(document for document in documents if document["env"]["world_size"] == 1)
    title = describe(setup_of(base), base["env"]).replace("batch ", "batch per process ", 1)
    baseline = base["config"]["baseline"]
    notes = scaling.notes(rows, baseline)
    accuracy = scaling.accuracy_table(rows)
    print("\n\n".join([title, scaling.table(rows, baseline), "\n".join(notes)]
                       + (["\n".join(accuracy)] if accuracy else [])))
    write_json(str(out / "scaling.json"), {"schema": scaling.SCHEMA, "title": title,
                                           "rounds": scaling.rounds_of(documents),
                                           "rows": [row.to_dict() for row in rows], "notes": notes, "launches": ran,
                                           "env": {key: base["env"].get(key) for key in
                                                   ("device", "torch", "hostname", "git_commit", "timestamp_utc")}})
    scaling.draw(str(out / "scaling.png"), rows, title)
    print(f"study written to {out / 'scaling.json'} and {out / 'scaling.png'}")
    return 0


def main(argv=None):
    with StudyStop() as stop:  # from argument parsing on, as main.py's: no Ctrl-C ends in a traceback
        options = parse(argv)
        try:
            return run(options, stop)
        except (UserError, WriteFailed) as error:
            return console.refused("scaling.py", error)


if __name__ == "__main__":
    sys.exit(console.run("scaling.py", main))
