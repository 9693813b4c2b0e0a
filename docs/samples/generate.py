"""Writes the sample outputs in docs/ from the result files beside this script, so that they
are what the code prints, not typed: each block after a `<!-- sample: NAME -->` line is the
command that measured NAME.json, then `python -m utils.report NAME.json`'s output (the summary
main.py printed, from the same code); the advice's block is the --advise command that wrote
advice/ (advice.json and the results.json it cites), then `python main.py --advise --from
docs/samples/advice/advice.json`'s report, decided again from them. After changing what the
summary or the report prints, run

    python docs/samples/generate.py

and commit the pages it rewrites; `--check` (run by tests/repository/test_docs.py) lists the samples that
drifted from the code and changes nothing. It writes the table after `<!-- table: committed-advice -->`
too: what `--advise --from` says of every results file under results/, decided again in this process.
"""
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from utils import console
from utils.errors import UserError
from utils.fileio import atomic_write

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

DATA = "--data-dir ../shared/data/cifar10-subset --allow-unverified"

# name: (the command that wrote docs/samples/NAME.json, the first line of the output to show)
SAMPLES = {
    "reading-the-numbers": (
        "python main.py -n 40 -b 32 --model resnet18 --stem imagenet " + DATA + " --modes fp32,amp-bf16 "
        "--repeats 3 --log-every 20 --json ex.json --plot docs/reading-the-numbers.png 2> job.log", None),
    "why": (
        "python main.py -m resnet18 --stem imagenet -b 32 -n 30 --modes fp32,amp-bf16 --explain " + DATA +
        " --json why.json --plot docs/why-is-it-not-faster.png", None),
    "loss-scaling": (
        "python main.py -m resnet18 --stem imagenet -b 32 -n 8 --timing-warmup 2 --modes "
        "fp32,amp-fp16-noscale,amp-fp16,amp-bf16 --numerics --numerics-every 4 --allow-slow-fp16 " + DATA +
        " --json loss-scaling.json --plot docs/why-loss-scaling.png", "Gradient census"),
}
# name: the --advise command that wrote docs/samples/NAME/ (its advice.json and results.json)
ADVICE = {
    "advice": "python main.py --advise -m resnet18 -b 64 --budget 3 " + DATA + " --advice-dir docs/samples/advice",
}
MARK = re.compile(r"^<!-- sample: ([\w-]+) -->\n```text\n.*?^```$", re.MULTILINE | re.DOTALL)
TABLE = re.compile(r"^<!-- table: committed-advice -->\n.*?^<!-- end of table -->$", re.MULTILINE | re.DOTALL)


def command_lines(command):
    """The command as a shell prompt, wrapped at 100 columns with continuation backslashes."""
    lines = textwrap.wrap(command, 96, break_long_words=False, break_on_hyphens=False)
    return [("$ " if i == 0 else "      ") + line + (" \\" if i < len(lines) - 1 else "")
            for i, line in enumerate(lines)]


def block(name):
    """The fenced block of sample `name`, as the code prints it now."""
    if name in ADVICE:
        command, first_line = ADVICE[name], None
        printer, printed_ok = ["main.py", "--advise", "--from", str(HERE / name / "advice.json")], (0, 3, 4)
    else:
        command, first_line = SAMPLES[name]
        printer, printed_ok = ["-m", "utils.report", str(HERE / f"{name}.json")], (0,)
    done = subprocess.run([sys.executable, *printer], cwd=ROOT, capture_output=True, text=True)
    if done.returncode not in printed_ok:  # the advice's exit status is its status (3: partial, 4: CPU)
        said = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"
        raise UserError(f"{' '.join(printer[:2])} cannot print sample {name} ({said}); restore "
                        f"docs/samples/{name} from git.")
    printed = done.stdout.rstrip("\n").splitlines()
    if first_line is not None:
        start = next(i for i, line in enumerate(printed) if line.startswith(first_line))
        printed = ["...   (the tables of times, memory and learning)"] + printed[start:]
    return "\n".join([f"<!-- sample: {name} -->", "```text", *command_lines(command), *printed, "```"])


def committed_results():
    """Every results file under results/ (the FP8 sweep's and the suite's own records aside)."""
    import json

    return [path for path in sorted((ROOT / "results").rglob("*.json"))
            if isinstance(json.loads(path.read_text()), dict) and "runs" in json.loads(path.read_text())]


def said_of(path):
    """(status and exit code, the one line that says why) of `--advise --from PATH`."""
    from utils.advice import decide, session
    from utils.results.merge import load_result

    try:
        advice = session.advice_document(load_result(str(path)), decide.Context(path.name), None, None, [])
    except UserError as refusal:
        return "refused (2)", str(refusal).split("; ")[0] + "."
    return f"{advice['status']} ({advice['exit_code']})", advice["claims"][0]["text"] + "."


def advice_table():
    """The markdown table of what --advise --from says of each committed results file."""
    rows = ["<!-- table: committed-advice -->", "| results file | `--advise --from` says | why, its first sentence |",
            "| --- | --- | --- |"]
    for path in committed_results():
        status, why = said_of(path)
        rows.append(f"| `{path.relative_to(ROOT / 'results')}` | {status} | {why.replace('|', '/')} |")
    return "\n".join(rows + ["<!-- end of table -->"])


def rewritten(page):
    """`page`'s text with every sample block and the advice table as the code prints them now."""
    text = MARK.sub(lambda match: block(match.group(1)), page.read_text())
    return TABLE.sub(lambda match: advice_table(), text)


def main(argv=None):
    parser = console.Parser("generate.py", prog="python docs/samples/generate.py",
                            description="Write the sample outputs in docs/ from docs/samples/*.json.")
    parser.add_argument("--check", action="store_true", help="list the pages whose samples drifted; write nothing")
    args = parser.parse_args(argv)
    drifted = []
    for page in sorted((ROOT / "docs").glob("*.md")):
        text = rewritten(page)
        if text != page.read_text():
            drifted.append(page.relative_to(ROOT))
            if not args.check:
                atomic_write(str(page), lambda f, text=text: f.write(text.encode()))
    if args.check and drifted:
        print(f"these pages' samples differ from what the code prints: {', '.join(map(str, drifted))}; run "
              "python docs/samples/generate.py and commit them.", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(console.run("generate.py", main))
