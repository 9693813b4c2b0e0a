"""The outputs of a run (--json, --csv, --plot, --checkpoint, --jsonl, --tensorboard,
--trace-dir): every path proven before training starts, not after an hour of it, and each file
written after the runs, on its own, so that one failure loses no other."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

from utils import fileio
from utils.data import cifar10
from utils.errors import UserError, WriteFailed
from utils.results import files, live, plot
from utils.results.summary import summary

if TYPE_CHECKING:
    from utils.config import RunConfig
    from utils.measure.progress import LiveStream


def check(config: RunConfig) -> None:
    """Every output path writable the way it will be written, no two outputs (symlinks followed)
    are one file, and none, file or folder, is in the data's folder (CIFAR-10's, or the image
    folder, where a folder written would read as a class). Changes nothing."""
    outputs = [(path, flag) for path, flag in [(config.measurement.json, "--json"), (config.measurement.csv, "--csv"),
                                                (config.measurement.plot, "--plot"),
                                                (config.checkpoints.checkpoint, "--checkpoint"),
                                                (config.measurement.jsonl, "--jsonl")] if path]
    seen: Dict[str, str] = {}
    data, called = data_folder(config)
    for path, flag in outputs:
        fileio.ensure_writable(path, flag)
        real = os.path.realpath(path)
        if real in seen:
            raise UserError(f"{seen[real]} and {flag} name the same file {path}; give each output its own file.")
        seen[real] = flag
        refuse_in_data_folder(flag, path, os.path.dirname(real), data, called)
    for folder, flag in [(config.measurement.tensorboard, "--tensorboard"),
                         (config.measurement.trace_dir, "--trace-dir")]:
        if folder:
            refuse_in_data_folder(flag, folder, os.path.realpath(folder), data, called)
    if config.measurement.jsonl:
        fileio.ensure_appendable(config.measurement.jsonl, "--jsonl")
    if config.measurement.csv:
        fileio.ensure_lockable(config.measurement.csv, "--csv")
        files.check_csv_header(config.measurement.csv)
    if config.measurement.plot:
        plot.check_available(config.measurement.plot)
    if config.measurement.tensorboard:
        live.check_tensorboard(config.measurement.tensorboard)
    if config.measurement.trace_dir:
        fileio.ensure_folder_writable(config.measurement.trace_dir, "--trace-dir")


def data_folder(config: RunConfig) -> Tuple[str, str]:
    """(the data's folder, symlinks followed; what a sentence calls it): CIFAR-10's, or the image
    folder, where a folder written would read as a class."""
    if config.data.data == "imagefolder":
        return os.path.realpath(config.data.data_dir), "the image folder --data-dir"
    return os.path.realpath(cifar10.batches_folder(config.data.data_dir)), "the CIFAR-10 folder"


def refuse_in_data_folder(flag: str, path: str, written_in: str, data_folder: str, called: str) -> None:
    """An output writes in the folder `written_in`: never in the data's folder (`called` so), at any depth."""
    if os.path.commonpath([written_in, data_folder]) == data_folder:
        raise UserError(f"{flag} {path} is in {called}; write results elsewhere.")


def write(config: RunConfig, stream: Optional[LiveStream],
          document: Dict[str, Any]) -> Tuple[List[str], List[str]]:
    """Write every output asked for, each on its own, the results file first: one that fails
    (a full disk, a file made read-only meanwhile) is reported and the others are still
    written; `stream` is the run's live log (None without --jsonl and --tensorboard). Returns
    (the lines saying what was written, the failures' sentences)."""
    written, failures = [], []
    for write_one in writers(config, stream, document):
        try:
            written.append(write_one())
        except WriteFailed as error:
            failures.append(str(error))
    return written, failures


def writers(config: RunConfig, stream: Optional[LiveStream],
            document: Dict[str, Any]) -> List[Callable[[], str]]:
    """A function per output asked for, which writes it and returns the line that says so."""
    def results():
        files.write_json(config.measurement.json, files.json_document(document))
        return f"results written to {config.measurement.json}"

    def rows():
        return f"{files.append_csv(config.measurement.csv, document)} rows appended to {config.measurement.csv}"

    def figure():
        plot.draw(config.measurement.plot, document)
        return f"plot written to {config.measurement.plot}"

    def streams():
        stream.comparison(summary(document, wide=True))
        stream.close()
        return "; ".join(([f"TensorBoard logs written to {stream.tensorboard}"]
                          if config.measurement.tensorboard else [])
                         + ([f"{config.measurement.jsonl} appended"] if config.measurement.jsonl else []))

    def nothing_to(flag, path):
        def refuse():
            raise WriteFailed(f"{flag} {path} was not written: no run got past its warm-up, so there are no step "
                              "times to compare.")
        return refuse

    compared = bool(document["comparison"])
    wanted = [(results, config.measurement.json),
              (rows if compared else nothing_to("--csv", config.measurement.csv), config.measurement.csv),
              (figure if compared else nothing_to("--plot", config.measurement.plot), config.measurement.plot),
              (streams, stream is not None)]
    return [write_one for write_one, asked in wanted if asked]
