"""Merge ampbench result files of several jobs into one comparison table:

    python -m utils.report fp32.json amp.json [--plot both.png] [--csv all.csv] [--json merged.json]
"""
from __future__ import annotations

import argparse
import sys
from typing import List, Optional, Sequence

from utils import console
from utils.errors import UserError, WriteFailed
from utils.fileio import ensure_lockable, ensure_writable
from utils.results.files import append_csv, check_csv_header, json_document, write_json
from utils.results.merge import load_result, merge, setup_differences
from utils.results.summary import summary


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = console.Parser("utils.report", prog="python -m utils.report",
                            description="Merge ampbench result files into one comparison table.")
    parser.add_argument("files", nargs="+", help="result files written with --json")
    parser.add_argument("--plot", metavar="PATH.png", help="also draw the step-time distributions and speedups")
    parser.add_argument("--csv", metavar="PATH", help="also append the merged rows to a CSV file")
    parser.add_argument("--json", metavar="PATH",
                        help="also write the merged document(s) as a JSON list, which this command reads back")
    parser.add_argument("--baseline", metavar="MODE",
                        help="the mode to compare with (default: the one the files compare with; needed when they "
                        "differ)")
    parser.add_argument("--wide", action="store_true", help="one wide table instead of blocks of 80 columns")
    args = parser.parse_args(argv)
    written: List[str] = []
    try:
        report(args, written)
    except UserError as error:
        return console.refused("utils.report", error)
    except WriteFailed as error:  # say only what was written: every write is all or nothing
        print(f"utils.report: error: {str(error).rstrip('.')}; " + (f"{', '.join(written)} written whole, nothing else."
              if written else "nothing was written."), file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # every write is all or nothing: say which ones happened
        print("utils.report: interrupted; " + (f"{', '.join(written)} written whole, nothing else."
                                               if written else "nothing was written."), file=sys.stderr)
        return 130
    return 0


def report(args: argparse.Namespace, written: List[str]) -> None:
    """Read, merge, print and write what `args` ask for, appending each path written to `written`."""
    for path, flag in ((args.json, "--json"), (args.csv, "--csv"), (args.plot, "--plot")):
        if path is not None:  # proven before anything is read: never a FIFO or device renamed over
            ensure_writable(path, flag)
    if args.csv:
        ensure_lockable(args.csv, "--csv")
    if args.plot:
        from utils.results import plot  # only here: the table needs neither matplotlib nor torch
        plot.check_available(args.plot)
    if args.csv:
        check_csv_header(args.csv)
    merged = merge([document for path in args.files for document in load_result(path)], args.baseline)
    if args.plot and len(merged) > 1:
        raise UserError(f"these files hold {len(merged)} setups that differ in more than the precision mode "
                        "(model, batch, speed levers, optimizer, device, torch or data); plot them separately.")
    differences = setup_differences(merged)
    for document, difference in zip(merged, differences):
        if len(merged) > 1:
            print(f"setup: {difference}")
        print(summary(document, args.wide) + "\n")
        if args.csv:
            added = append_csv(args.csv, document)
            written += [args.csv] if added and args.csv not in written else []
            print(f"{added} of {len(document['comparison'])} rows appended to {args.csv} (the others were "
                  "there already)\n" if added < len(document["comparison"]) else
                  f"{added} rows appended to {args.csv}\n")
    if args.json:
        write_json(args.json, [json_document(document) for document in merged])
        written.append(args.json)
    if args.plot:
        plot.draw(args.plot, merged[0])
        written.append(args.plot)
        print(f"plot written to {args.plot}")


command = console.program("utils.report", main)  # the installed `ampbench-report`

if __name__ == "__main__":
    sys.exit(command())
