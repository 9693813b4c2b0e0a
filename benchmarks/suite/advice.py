"""Which precision for model X on GPU Y: every advice.json the suite's advise step left under the
results root, as one table across devices: the model and image size, the GPU, the advised mode
and levers (or why there is no advice yet, and which way the figures lean), the evidence it
rests on in one line, and its report. Each file is read with utils/advice/document.py's checks;
one that fails them is left out with a warning naming it. A device without advice has no row."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List, Tuple

from benchmarks.suite.history import device_folders, saved_suites, warn
from benchmarks.suite.plan import ADVICE_DIR
from models.families import DEFAULT_IMAGE_SIZE


def saved_advice(results_root: Path) -> List[Tuple[str, Path, Dict[str, Any]]]:
    """(device, its advice.json, the advice) of the newest advice of each model, image size and
    device under `results_root`, devices in name order."""
    from utils.advice.document import load
    from utils.errors import UserError

    found: Dict[Tuple[str, str, int], Tuple[str, Path, Dict[str, Any]]] = {}
    for folder in device_folders(results_root):
        for suite in saved_suites(folder, rendered=True):  # newest first
            path = suite.folder / ADVICE_DIR / "advice.json"
            if not path.is_file():
                continue
            try:
                advice = load(str(path))
            except UserError as error:
                warn(path, f"{error}; it is left out")
                continue
            setup = advice["setup"]
            key = (suite.record["device"], str(setup.get("model")), setup.get("image_size") or DEFAULT_IMAGE_SIZE)
            found.setdefault(key, (suite.record["device"], path, advice))
    return list(found.values())


def advised(advice: Dict[str, Any]) -> str:
    """The mode and levers to train with, or why there is no advice yet and which way the figures lean."""
    recommendation = advice["recommendation"]
    if recommendation is None:
        return f"none yet ({advice['status']}; leans {advice['lean']})"
    levers = [name.replace("_", " ") if value is True else f"{name.replace('_', ' ')} {value}"
              for name, value in recommendation["settings"].items() if value not in (None, False)]
    return ", ".join([recommendation["mode"], *levers])


def evidence_line(advice: Dict[str, Any]) -> str:
    """The figure the first sentence rests on: its first measured evidence, in one line."""
    entries = {entry["id"]: entry for entry in advice["evidence"]}
    cited = [entries[ident] for ident in advice["claims"][0]["evidence"]]
    entry = next((entry for entry in cited if entry["kind"] == "measured"), cited[0])
    value, interval = entry["value"], entry["interval"]
    shown = (", ".join(f"{each:.2f}" for each in value) if isinstance(value, list)
             else f"{value:.2f}" if isinstance(value, (int, float)) else str(value))
    return (f"{entry['what']}: {shown}" + (f" [{interval[0]:.2f}, {interval[1]:.2f}]" if interval else "")
            + (f" ({entry['n']} runs)" if entry.get("n") else ""))


def advice_table(results_root: Path, readme_dir: Path) -> List[str]:
    """README's table of the advice across devices; nothing where no device has any."""
    rows = []
    for device, path, advice in saved_advice(results_root):
        setup = advice["setup"]
        report = os.path.relpath(path.parent / "report.txt", readme_dir)
        rows.append(f"| {setup.get('model')} | {setup.get('image_size') or DEFAULT_IMAGE_SIZE} | {device} | "
                    f"{advised(advice)} | {evidence_line(advice).replace('|', '/')} | [report]({report}) |")
    if not rows:
        return []
    return ["Which precision to train with, by the suite's `advise` step ([`main.py --advise`](docs/advice.md)):", "",
            "| model | image | GPU | advised | rests on | report |", "| --- | ---: | --- | --- | --- | --- |",
            *rows, ""]
