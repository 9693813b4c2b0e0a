"""The property-based campaign over output paths. Hypothesis builds, per output flag, a path
of every awkward kind (FIFOs, links to devices, symlink loops, dangling links, names of 250 to
260 bytes, non-ASCII and control characters, folders, existing files, paths through a file),
then asks what main.py asks before training. The property: either the path is refused with
one sentence and nothing there changes, or the write after training succeeds and leaves a
regular file; special files are never replaced, and nothing raises anything else."""
import os
import stat

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import read_results, run_main
from utils import fileio
from utils.config import RunConfig
from utils.errors import UserError
from utils.results import files, live, run_outputs

pytestmark = pytest.mark.long  # its own CI stage (pytest.ini)

FLAGS = ("json", "csv", "checkpoint", "jsonl", "trace_dir")
KINDS = ("new", "existing", "fifo", "dev_null_link", "loop", "dangling_link", "folder", "through_a_file",
         "proc_link", "nested_new", "name_250", "name_255", "name_256", "name_260", "unicode", "control")


@pytest.fixture(scope="module")
def document(tmp_path_factory):
    """A genuine results document, for the CSV writes."""
    path = tmp_path_factory.mktemp("doc") / "r.json"
    result = run_main("--data", "synthetic", "-n", "2", "--warmup", "1", "--model", "squeezenet1_1", "-b", "4",
                      "--no-progress", "--json", path)
    assert result.returncode == 0, result.stderr
    return read_results(path)


def make(kind, folder, index):
    """A path of `kind` in `folder`."""
    name = f"out{index}"
    path = os.path.join(folder, name)
    if kind == "existing":
        with open(path, "w") as f:
            f.write("old")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev_null_link":
        os.symlink(os.devnull, path)
    elif kind == "loop":
        os.symlink(path, path)
    elif kind == "dangling_link":
        os.symlink(os.path.join(folder, f"target{index}"), path)
    elif kind == "folder":
        os.mkdir(path)
    elif kind == "through_a_file":
        with open(path, "w") as f:
            f.write("a file, not a folder")
        path = os.path.join(path, "inside")
    elif kind == "proc_link":
        os.symlink("/proc/self/out", path)
    elif kind == "nested_new":
        path = os.path.join(folder, f"a{index}", "b", name)
    elif kind.startswith("name_"):
        path = os.path.join(folder, "n" * (int(kind[5:]) - len(str(index))) + str(index))
    elif kind == "unicode":
        path = os.path.join(folder, f"résultats-日本-{index}")
    elif kind == "control":
        path = os.path.join(folder, f"line\nbreak\t{index}")
    return path


def snapshot(folder):
    """Every entry under `folder`: its kind, inode and content (of regular files)."""
    found = {}
    for root, dirs, names in os.walk(folder):
        for entry in dirs + names:
            path = os.path.join(root, entry)
            info = os.lstat(path)
            content = open(path, "rb").read() if stat.S_ISREG(info.st_mode) else None
            found[path] = (stat.S_IFMT(info.st_mode), info.st_ino, content)
    return found


def write(flag, path, document):
    """What main.py writes to `path` after training."""
    if flag == "json":
        files.write_json(path, files.json_document(document))
    elif flag == "csv":
        files.append_csv(path, document)
    elif flag == "checkpoint":
        fileio.atomic_write(path, lambda f: f.write(b"checkpoint bytes"))
    elif flag == "jsonl":
        stream = live.LiveLog(path, None, "unused")
        stream.phase("a line")
        stream.close()
    else:
        fileio.atomic_write(os.path.join(path, "trace.pt.trace.json"), lambda f: f.write(b"{}"))


CAMPAIGN = settings(max_examples=int(os.environ.get("HOSTILE_EXAMPLES", "0")) or 160, deadline=None,
                    derandomize=not os.environ.get("HOSTILE_RANDOM"),
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@CAMPAIGN
@given(outputs=st.lists(st.tuples(st.sampled_from(FLAGS), st.sampled_from(KINDS)), min_size=1, max_size=3,
                        unique_by=lambda output: output[0]))
def test_every_output_path_is_refused_before_training_or_written_whole(outputs, document, tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("outputs"))
    paths = {flag: make(kind, folder, index) for index, (flag, kind) in enumerate(outputs)}
    before = snapshot(folder)
    try:
        config = RunConfig.build(data="synthetic", steps=3, warmup=1, **paths)
        run_outputs.check(config.measurement, config.checkpoints, config.data)
    except UserError as error:
        assert "\n" not in str(error).replace("line\nbreak", "") and str(error).endswith("."), str(error)
        assert snapshot(folder) == before, "a refused output changed what was there"
        return
    for flag, path in paths.items():
        write(flag, path, document)
        written = os.path.join(path, "trace.pt.trace.json") if flag == "trace_dir" else path
        assert stat.S_ISREG(os.stat(written).st_mode)
    for path, (kind, inode, _) in before.items():
        if not stat.S_ISREG(kind) and not stat.S_ISDIR(kind) and os.path.lexists(path):
            assert os.lstat(path).st_ino == inode, f"{path} was replaced"
    assert os.path.exists(os.devnull) and stat.S_ISCHR(os.stat(os.devnull).st_mode)
