"""Writes docs/flags.md's tables of every flag from the settings of utils/config.py's sections,
whose fields describe each flag once, as `python main.py -h` shows it too, and of the earlier
spellings from utils/spellings.py. After changing a setting there, run

    python docs/generate_flags.py

and commit docs/flags.md; `--check` (run by tests/repository/test_docs.py) says whether the page drifted
from the table and changes nothing. The page's prose outside the tables is written by hand.
"""
import sys
from pathlib import Path

from utils import config, console, spellings
from utils.fileio import atomic_write

ROOT = Path(__file__).resolve().parent.parent

PAGE = ROOT / "docs" / "flags.md"
START = "<!-- the flag tables: python docs/generate_flags.py writes them from utils/config.py's settings -->"
END = "<!-- end of the flag tables -->"


def value_name(setting):
    """What -h shows after the flag's names for its value, as argparse words it; None for a switch."""
    flag = setting.flag
    if flag.action is not None:
        return None
    if flag.metavar is not None:
        return flag.metavar
    if flag.choices is not None:
        return "{" + ",".join(flag.choices) + "}"
    return setting.key.upper()


def row(setting, defaults):
    """The setting's table row: its flag's names and value, then the page's text with argparse's %-formatting."""
    flag, value = setting.flag, value_name(setting)
    names = "/".join(flag.names) + (f" {value}" if value else "")
    text = flag.help if flag.doc is None else flag.doc.replace("{help}", flag.help)
    text = text % {"default": defaults[setting.key]}
    return f"| `{names}` | {text} |"


def tables():
    """A section per -h group, in -h's order, each a table of its flags; then, as -h ends, the
    earlier spellings and what each is now (utils/spellings.py)."""
    defaults = config.defaults()
    lines = [START]
    settings = config.SETTINGS.values()
    for group in dict.fromkeys(setting.group for setting in settings):
        lines += ["", f"## {group}", "", "| flag | meaning |", "| --- | --- |"]
        lines += [row(setting, defaults) for setting in settings if setting.group == group]
    lines += ["", f"## {spellings.TITLE}", "", "| earlier | now | |", "| --- | --- | --- |"]
    lines += [f"| `{earlier.typed}` | {f'`{earlier.current}`' if earlier.current else '(nothing)'} | {earlier.origin} |"
              for earlier in spellings.EARLIER]
    return "\n".join(lines + ["", END])


def rewritten(page_text):
    """The page with its flag tables as the settings describe the flags now."""
    before, rest = page_text.split(START, 1)
    after = rest.split(END, 1)[1]
    return before + tables() + after


def main(argv=None):
    parser = console.Parser("generate_flags.py", prog="python docs/generate_flags.py",
                            description="Write docs/flags.md's flag tables from utils/config.py's settings.")
    parser.add_argument("--check", action="store_true", help="say whether the page drifted; write nothing")
    args = parser.parse_args(argv)
    text = rewritten(PAGE.read_text())
    if text == PAGE.read_text():
        return 0
    if args.check:
        print("docs/flags.md differs from the settings; run python docs/generate_flags.py and commit it.",
              file=sys.stderr)
        return 1
    atomic_write(str(PAGE), lambda f: f.write(text.encode()))
    return 0


if __name__ == "__main__":
    sys.exit(console.run("generate_flags.py", main))
