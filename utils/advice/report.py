"""The report --advise prints and writes as report.txt, from advice.json alone: a heading, the
numbered sentences each ending in its evidence ids, the lines that would settle the accuracy
where it is inconclusive, the evidence table, and the one command that trains as advised. No
torch: `--advise --from advice.json` prints it again."""
from __future__ import annotations

from typing import Any, Dict, List, Sequence

from utils.advice.commands import shell_line
from utils.console import one_line

NAMES = {"lightning": "Lightning", "transformers": "Hugging Face", "timm": "timm", "pytorch": "PyTorch"}
WHAT_WIDTH = 52  # the evidence table's "what" column, cut to fit (advice.json holds it whole)
VALUE_WIDTH = 40  # and a value in words
AGAINST_THE_BASELINE = ("_vs_baseline", "accuracy_mean_delta")  # the fields whose value depends on it


def sentence(claim: Dict[str, Any]) -> str:
    return f"{claim['text']} [{', '.join(claim['evidence'])}]."


def shown(value: Any) -> str:
    """A figure as the table shows it: four significant digits, text cut to fit."""
    if value is None:
        return "-"
    if isinstance(value, list) and all(isinstance(item, (int, float)) for item in value):
        return cut(", ".join(f"{item:.4g}" for item in value), VALUE_WIDTH)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return cut(str(value), VALUE_WIDTH)
    return f"{value:.4g}"


def cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def source_text(source: Dict[str, Any]) -> str:
    """Where an evidence entry comes from, in a few words (evidence.py's sources)."""
    if "ratio_of" in source:
        return " / ".join(source_text(part) for part in source["ratio_of"])
    if "advice" in source:
        return "advice.json " + ".".join(map(str, source["advice"]))
    if "rule" in source:
        return f"the rule {source['rule']}"
    if "busy_runs" in source:
        return f"[{source['busy_runs']['document']}] runs[].host.warning, counted"
    if "derived" in source:
        return f"{source['derived']} of {', '.join(source['of'])}"
    against = any(str(key).endswith(AGAINST_THE_BASELINE) for key in source["field"])
    return f"[{source['document']}] {'.'.join(map(str, source['field']))}" + \
        (f" vs {source['baseline']}" if against else "")


def evidence_table(entries: Sequence[Dict[str, Any]]) -> List[str]:
    rows = [["id", "kind", "what", "value", "95% interval", "n", "from"]]
    for entry in entries:
        interval = entry["interval"]
        what = cut(entry["what"], WHAT_WIDTH)
        rows.append([entry["id"], entry["kind"], what, shown(entry["value"]),
                     f"{interval[0]:.4g} to {interval[1]:.4g}" if interval else "-",
                     shown(entry["n"]), source_text(entry["source"])])
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]) - 1)]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[-1] for row in rows]


def heading(advice: Dict[str, Any]) -> str:
    config = advice["setup"]
    where = advice["setup"].get("device") or "?"
    return (f"Which precision should {config.get('model')} train with, batch {config.get('batch_size')}, "
            f"{config.get('image_size') or 32}x{config.get('image_size') or 32} images, on {where}? "
            f"Status: {advice['status']} (exit {advice['exit_code']}).")


def report(advice: Dict[str, Any]) -> str:
    """The whole report of `advice` (an advice.json document)."""
    lines = [heading(advice), ""]
    lines += [f"{number:2d}. {sentence(claim)}" for number, claim in enumerate(advice["claims"], 1)]
    check = advice.get("accuracy_check")
    if check and advice.get("accuracy_verdict") == "inconclusive" and check.get("lines"):
        lines += ["", f"The accuracy check ({check['seeds']} paired seeds), here or as batch jobs:"]
        lines += [f"  {name}: {line}" for name, line in check["lines"].items()]
    lines += ["", f"Evidence: [N] is document N of {advice['results']} as python -m utils.report FILE --baseline B "
                  "compares it; advice.json holds every entry whole."]
    lines += evidence_table(advice["evidence"])
    if advice["recommendation"] is not None:
        lines += ["", "Train with:", "  " + shell_line(advice["recommendation"]["command"],
                                                      advice["recommendation"].get("environment"))]
        if advice["recommendation"].get("nsys"):
            lines += ["Its timeline under Nsight Systems:", "  " + advice["recommendation"]["nsys"]]
        said = advice["recommendation"].get("frameworks") or {}
        if said:
            lines += ["", "The same setting in your framework:"]
            for name, line in said.items():  # PyTorch's is code, a statement a line
                first, *more = line.splitlines()
                lines += [f"  {NAMES[name]}: {first}"] if not more else \
                    [f"  {NAMES[name]}:", *(f"      {code}" for code in line.splitlines())]
    else:
        lines += ["", "Measure again, alone on this machine or a quiet node:"]
        lines += [f"  {name}: {line}" for name, line in advice["measure_again"].items()]
    budget = advice.get("budget")
    if budget:
        lines.append(f"(--advise spent {budget['spent_s'] / 60:.1f} of its {budget['minutes']:g} minutes.)")
    return "\n".join(one_line(line) for line in lines)  # a field of the files never forges or hides a line
