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
    from utils.config import Checkpoints, DataSettings, Measurement
    from utils.measure.progress import LiveStream


def check(measurement: Measurement, checkpoints: Checkpoints, data: DataSettings) -> None:
    """Every output path writable the way it will be written, no two outputs (symlinks followed)
    are one file, and none, file or folder, is in the data's folder (CIFAR-10's, or the image
    folder, where a folder written would read as a class). Changes nothing."""
    outputs = [(path, flag) for path, flag in [(measurement.json, "--json"), (measurement.csv, "--csv"),
                                                (measurement.plot, "--plot"), (checkpoints.checkpoint, "--checkpoint"),
                                                (measurement.jsonl, "--jsonl")] if path]
    seen: Dict[str, str] = {}
    data_at, called = data_folder(data)
    for path, flag in outputs:
        fileio.ensure_writable(path, flag)
        real = os.path.realpath(path)
        if real in seen:
            raise UserError(f"{seen[real]} and {flag} name the same file {path}; give each output its own file.")
        seen[real] = flag
        refuse_in_data_folder(flag, path, os.path.dirname(real), data_at, called)
    for folder, flag in [(measurement.tensorboard, "--tensorboard"),
                         (measurement.trace_dir, "--trace-dir")]:
        if folder:
            refuse_in_data_folder(flag, folder, os.path.realpath(folder), data_at, called)
    if measurement.jsonl:
        fileio.ensure_appendable(measurement.jsonl, "--jsonl")
    if measurement.csv:
        fileio.ensure_lockable(measurement.csv, "--csv")
        files.check_csv_header(measurement.csv)
    if measurement.plot:
        plot.check_available(measurement.plot)
    if measurement.tensorboard:
        live.check_tensorboard(measurement.tensorboard)
    if measurement.trace_dir:
        fileio.ensure_folder_writable(measurement.trace_dir, "--trace-dir")


def data_folder(data: DataSettings) -> Tuple[str, str]:
    """(the data's folder, symlinks followed; what a sentence calls it): CIFAR-10's, or the image
    folder, where a folder written would read as a class."""
    if data.data == "imagefolder":
        return os.path.realpath(data.data_dir), "the image folder --data-dir"
    return os.path.realpath(cifar10.batches_folder(data.data_dir)), "the CIFAR-10 folder"


def refuse_in_data_folder(flag: str, path: str, written_in: str, data_folder: str, called: str) -> None:
    """An output writes in the folder `written_in`: never in the data's folder (`called` so), at any depth."""
    if os.path.commonpath([written_in, data_folder]) == data_folder:
        raise UserError(f"{flag} {path} is in {called}; write results elsewhere.")


def write(measurement: Measurement, stream: Optional[LiveStream],
          document: Dict[str, Any]) -> Tuple[List[str], List[str]]:
    """Write every output asked for, each on its own, the results file first: one that fails
    (a full disk, a file made read-only meanwhile) is reported and the others are still
    written; `stream` is the run's live log (None without --jsonl and --tensorboard). Returns
    (the lines saying what was written, the failures' sentences)."""
    written, failures = [], []
    for write_one in writers(measurement, stream, document):
        try:
            written.append(write_one())
        except WriteFailed as error:
            failures.append(str(error))
    return written, failures


def writers(measurement: Measurement, stream: Optional[LiveStream],
            document: Dict[str, Any]) -> List[Callable[[], str]]:
    """A function per output asked for, which writes it and returns the line that says so."""
    def results():
        files.write_json(measurement.json, files.json_document(document))
        return f"results written to {measurement.json}"

    def rows():
        return f"{files.append_csv(measurement.csv, document)} rows appended to {measurement.csv}"

    def figure():
        plot.draw(measurement.plot, document)
        return f"plot written to {measurement.plot}"

    def streams():
        stream.comparison(summary(document, wide=True))
        stream.close()
        return "; ".join(([f"TensorBoard logs written to {stream.tensorboard}"]
                          if measurement.tensorboard else [])
                         + ([f"{measurement.jsonl} appended"] if measurement.jsonl else []))

    def nothing_to(flag, path):
        def refuse():
            raise WriteFailed(f"{flag} {path} was not written: no run got past its warm-up, so there are no step "
                              "times to compare.")
        return refuse

    compared = bool(document["comparison"])
    wanted = [(results, measurement.json),
              (rows if compared else nothing_to("--csv", measurement.csv), measurement.csv),
              (figure if compared else nothing_to("--plot", measurement.plot), measurement.plot),
              (streams, stream is not None)]
    return [write_one for write_one, asked in wanted if asked]
