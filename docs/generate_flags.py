"""Writes docs/flags.md's tables of every flag from utils/flags.py, the one description of each
flag that `python main.py -h` shows too. After changing a flag there, run

    python docs/generate_flags.py

and commit docs/flags.md; `--check` (run by tests/repository/test_docs.py) says whether the page drifted
from the table and changes nothing. The page's prose outside the tables is written by hand.
"""
import sys
from pathlib import Path

from utils import config, console
from utils.fileio import atomic_write
from utils.flags import FLAGS

ROOT = Path(__file__).resolve().parent.parent

PAGE = ROOT / "docs" / "flags.md"
START = "<!-- the flag tables: python docs/generate_flags.py writes them from utils/flags.py -->"
END = "<!-- end of the flag tables -->"


def value_name(flag):
    """What -h shows after the flag's names for its value, as argparse words it; None for a switch."""
    if flag.action is not None:
        return None
    if flag.metavar is not None:
        return flag.metavar
    if flag.choices is not None:
        return "{" + ",".join(flag.choices) + "}"
    return flag.setting.upper()


def row(flag, defaults):
    """The flag's table row: its names and value, then the page's text with argparse's %-formatting."""
    value = value_name(flag)
    names = "/".join(flag.names) + (f" {value}" if value else "")
    text = flag.help if flag.doc is None else flag.doc.replace("{help}", flag.help)
    text = text % {"default": defaults[flag.setting]}
    return f"| `{names}` | {text} |"


def tables():
    """A section per -h group, in -h's order, each a table of its flags."""
    defaults = config.defaults()
    lines = [START]
    for group in dict.fromkeys(flag.group for flag in FLAGS):
        lines += ["", f"## {group}", "", "| flag | meaning |", "| --- | --- |"]
        lines += [row(flag, defaults) for flag in FLAGS if flag.group == group]
    return "\n".join(lines + ["", END])


def rewritten(page_text):
    """The page with its flag tables as utils/flags.py describes the flags now."""
    before, rest = page_text.split(START, 1)
    after = rest.split(END, 1)[1]
    return before + tables() + after


def main(argv=None):
    parser = console.Parser("generate_flags.py", prog="python docs/generate_flags.py",
                            description="Write docs/flags.md's flag tables from utils/flags.py.")
    parser.add_argument("--check", action="store_true", help="say whether the page drifted; write nothing")
    args = parser.parse_args(argv)
    text = rewritten(PAGE.read_text())
    if text == PAGE.read_text():
        return 0
    if args.check:
        print("docs/flags.md differs from utils/flags.py; run python docs/generate_flags.py and commit it.",
              file=sys.stderr)
        return 1
    atomic_write(str(PAGE), lambda f: f.write(text.encode()))
    return 0


if __name__ == "__main__":
    sys.exit(console.run("generate_flags.py", main))
