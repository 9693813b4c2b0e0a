"""Does the AMP speedup survive many GPUs? The scaling study in one command.

    python benchmarks/scaling.py -p --out study -- -m resnet50 -n 200 -b 128 --data-dir DIR
    python benchmarks/scaling.py -p --out study --grad-comm fp32,bf16 --rounds 3 -- -m resnet50 -n 200
    python benchmarks/scaling.py --world-sizes 1,2 --out study -- -m resnet18 -n 20 -b 16   # CPU, a check

Launches main.py with torchrun for each world size (1, 2, 4, ... up to the GPUs visible, or
--world-sizes), each --grad-comm and each round, at the same per-process batch (weak scaling),
every mode of --modes in each launch with --explain; then merges the launches' result files into
one table, scaling.json and scaling.png under --out (utils/results/scaling.py: images/s,
scaling efficiency with its 95% interval, the AMP speedup at each size, the exposed
communication share). Flags after `--` go to every launch of main.py. Rounds interleave the
world sizes; with --rounds 3 the intervals rest on the launches' medians.
"""
import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from utils.errors import UserError, WriteFailed  # noqa: E402 (no torch)
from utils.setup_keys import GRAD_COMM  # noqa: E402
from utils.training import modes  # noqa: E402

# main.py flags the study sets itself in every launch
OWN_FLAGS = ("--json", "--modes", "--compare", "--grad-comm", "--fp16", "--bf16", "--amp", "--tf32", "--explain")


def parse(argv):
    parser = argparse.ArgumentParser(prog="scaling.py", description=__doc__.split("\n")[0])
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
    return sizes


def checked(options, visible):
    """The study's plan: (world sizes, modes, grad comms), every input refused in one sentence."""
    sizes = world_sizes(options.world_sizes, options.gpu, visible)
    names = options.modes or ",".join(modes.DEFAULT_COMPARE if options.gpu else modes.DEFAULT_COMPARE_CPU)
    modes.parse_modes(names)  # refuses unknown modes
    comms = options.grad_comm.split(",")
    if not set(comms) <= set(GRAD_COMM) or len(set(comms)) != len(comms):
        raise UserError(f"--grad-comm is a comma list from {', '.join(GRAD_COMM)}, each once; got {options.grad_comm}.")
    if options.rounds < 1:
        raise UserError(f"--rounds must be 1 or more; got {options.rounds}.")
    taken = [flag for flag in options.main_flags if flag.split("=")[0] in OWN_FLAGS]
    if taken:
        raise UserError(f"{taken[0]} is set by the study in every launch; give it to scaling.py or drop it.")
    return sizes, names, comms


def launches(sizes, comms, rounds):
    """(round, ranks, grad comm) in order: each round runs every size once per --grad-comm (one
    process once: nothing travels), so that a slow spell of the machine touches every size."""
    return [(number, size, comm) for number in range(1, rounds + 1) for size in sizes
            for comm in (comms if size > 1 else [None])]


def launch(out, plan, names, options):
    """Run one launch of main.py under torchrun; returns its results file and what ran."""
    number, size, comm = plan
    name = f"round{number}-ranks{size}" + (f"-{comm}" if comm else "")
    result, log = out / f"{name}.json", out / "logs" / f"{name}.log"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={size}",
               str(ROOT / "main.py"), *options.main_flags, *(["-p"] if options.gpu else []), "--modes", names,
               "--explain", "--no-progress", "--json", str(result), *(["--grad-comm", comm] if comm else [])]
    started = time.monotonic()
    with open(log, "w") as output:
        status = subprocess.run(command, cwd=ROOT, stdout=output, stderr=subprocess.STDOUT).returncode
    if status != 0:
        raise WriteFailed(f"the launch on {size} ranks{f' (--grad-comm {comm})' if comm else ''} failed with exit "
                          f"status {status}: its output is in {log}, and the results measured before it are in {out}.")
    print(f"  {name}: {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    return result, {"command": command, "json": str(result), "log": str(log), "seconds": time.monotonic() - started}


def visible_gpus(gpu):
    if not gpu:
        return 0
    import torch
    return torch.cuda.device_count()


def run(options):
    """Check everything, launch every run, then merge, print and write the study."""
    from utils import fileio
    from utils.results import plot

    out = Path(options.out)
    if options.from_dir:
        found = sorted(path for path in Path(options.from_dir).glob("*.json") if path.name != "scaling.json")
        if not found:
            raise UserError(f"--from {options.from_dir} holds no result files (*.json) of main.py.")
        fileio.ensure_folder_writable(str(out), "--out")
        plot.check_available(str(out / "scaling.png"))
        return finish(out, found, [], options)
    sizes, names, comms = checked(options, visible_gpus(options.gpu))
    fileio.ensure_folder_writable(str(out), "--out")
    plot.check_available(str(out / "scaling.png"))
    (out / "logs").mkdir(parents=True, exist_ok=True)
    plans = launches(sizes, comms, options.rounds)
    print(f"scaling study: {len(plans)} launches of {names} on {', '.join(map(str, sizes))} ranks", file=sys.stderr)
    done = [launch(out, plan, names, options) for plan in plans]
    return finish(out, [result for result, _ in done], [ran for _, ran in done], options)


def finish(out, results, ran, options):
    """The table on stdout; scaling.json and scaling.png under `out`."""
    from utils.results import scaling
    from utils.results.merge import load_result
    from utils.results.files import write_json
    from utils.results.record import setup_of
    from utils.results.summary import describe

    documents = [document for path in results for document in load_result(str(path))]
    rows = scaling.study(documents)
    base = next(document for document in documents if document["env"]["world_size"] == 1)
    title = describe(setup_of(base), base["env"]).replace("batch ", "batch per process ", 1)
    notes = scaling.notes(rows)
    accuracy = scaling.accuracy_table(rows)
    print("\n\n".join([title, scaling.table(rows), "\n".join(notes)] + (["\n".join(accuracy)] if accuracy else [])))
    write_json(str(out / "scaling.json"), {"schema": scaling.SCHEMA, "title": title, "rounds": options.rounds,
                                           "rows": [row.to_dict() for row in rows], "notes": notes, "launches": ran,
                                           "env": {key: base["env"].get(key) for key in
                                                   ("device", "torch", "hostname", "git_commit", "timestamp_utc")}})
    scaling.draw(str(out / "scaling.png"), rows, title)
    print(f"study written to {out / 'scaling.json'} and {out / 'scaling.png'}")
    return 0


def main(argv=None):
    options = parse(argv)
    try:
        return run(options)
    except (UserError, WriteFailed) as error:
        print(f"scaling.py: error: {error}", file=sys.stderr)
        return 2 if isinstance(error, UserError) else 1


if __name__ == "__main__":
    sys.exit(main())
