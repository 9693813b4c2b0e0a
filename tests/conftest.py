import atexit
import contextlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import pytest

import cifar10_standin

ROOT = Path(__file__).resolve().parents[1]  # first on sys.path in this process: pytest.ini's pythonpath
# The programs the tests start by their path (benchmarks/*.py, cluster/bundle.py) import this
# checkout's packages first: README's set-up installs the checkout editable, but a venv that
# several checkouts share (git worktrees, the copy test_bare_clone.py makes) finds the one
# installed there. tests/repository/test_programs.py tests the install itself, without this.
os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])

# CIFAR-10 for the tests: the genuine subset that lies beside the checkout (see its README), or
# wherever $AMPBENCH_SUBSET names its cifar-10-batches-py folder. Where neither holds it (a
# stranger's clone), a stand-in in the same format is made for this session (cifar10_standin.py),
# and the few tests that need real photographs skip (`real_cifar10`). Either way its md5 sums are
# not the official ones, so it needs --allow-unverified. $AMPBENCH_SUBSET is set to the folder used,
# so that the processes the tests start (a suite inside a test) read the same one.
SUBSET_GIVEN = Path(os.environ.get("AMPBENCH_SUBSET",
                                   ROOT.parent / "shared" / "data" / "cifar10-subset" / "cifar-10-batches-py"))
STANDIN = not all((SUBSET_GIVEN / name).is_file() for name, _ in cifar10_standin.BATCHES)
SUBSET = cifar10_standin.build() if STANDIN else SUBSET_GIVEN
if STANDIN:
    atexit.register(cifar10_standin.remove, SUBSET)
os.environ["AMPBENCH_SUBSET"] = str(SUBSET)

# One torch thread per process, in this one and the ones it starts: on a busy 2-core machine two
# OpenMP threads per process spin-wait for each other whenever one is descheduled, and the
# suite took over three times its quiet time at load 3. Set before torch is imported.
os.environ.setdefault("OMP_NUM_THREADS", "1")

# The image folders' indexes (utils/data/index.py) are cached in a folder of this session's, never
# in the user's ~/.cache, in this process and the ones it starts.
CACHE = tempfile.mkdtemp(prefix="ampbench-cache-")
atexit.register(shutil.rmtree, CACHE, True)
os.environ["AMPBENCH_CACHE"] = CACHE

# No test may download CIFAR-10 (170 MB): a first run tries to, so the network is a
# proxy that refuses every connection, in this process and the ones it starts.
os.environ["http_proxy"] = os.environ["https_proxy"] = "http://127.0.0.1:9"

# A small model and batch that make CLI runs take seconds on a 2-core CPU.
FAST = ["--model", "resnet18", "--stem", "imagenet", "-b", "16", "--warmup", "2", "--no-progress"]


def pytest_report_header():
    if STANDIN:
        return (f"CIFAR-10: a generated stand-in at {SUBSET} (no subset at {SUBSET_GIVEN}; set $AMPBENCH_SUBSET to "
                "a cifar-10-batches-py folder to test on real images)")
    return f"CIFAR-10: the subset at {SUBSET}"


@pytest.fixture
def subset():
    """The cifar-10-batches-py folder the tests train on: the genuine subset or the stand-in."""
    return SUBSET


@pytest.fixture
def real_cifar10():
    """The genuine subset, for a test whose claim is about real photographs; skips on the stand-in."""
    if STANDIN:
        pytest.skip(f"needs real CIFAR-10 images: no subset at {SUBSET_GIVEN} (set $AMPBENCH_SUBSET to the "
                    "genuine subset's cifar-10-batches-py folder)")
    return SUBSET


@pytest.fixture
def forget_imports(tmp_path):
    """The modules a test imported from its tmp_path forgotten after it (a user's module, a
    made-up library), so that another test's module of the same name imports afresh."""
    yield
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", None) or "").startswith(str(tmp_path)):
            del sys.modules[name]


def run_cli(*args, timeout=300, env=None):
    """Run main.py as a user would; returns the CompletedProcess."""
    return subprocess.run([sys.executable, str(ROOT / "main.py"), *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def run_main(*args):
    """main.main(args) in this process, the code `python main.py` runs, without the seconds a
    new process spends importing torch and torchvision: for refusals, where any traceback
    fails the test. Returns a CompletedProcess, as run_cli does."""
    import main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main.main([str(arg) for arg in args])
        except SystemExit as exit:  # argparse's own refusals
            status = exit.code
    return subprocess.CompletedProcess(["main.py", *map(str, args)], status, out.getvalue(), err.getvalue())


def assert_user_error(result, *phrases):
    """Exit 2, one clear sentence on stderr, no traceback."""
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    for phrase in phrases:
        assert phrase in result.stderr, result.stderr


def copy_subset(subset, tmp_path):
    """A writable copy of the subset's batch folder, for tests that damage a file."""
    folder = tmp_path / "cifar-10-batches-py"
    shutil.copytree(subset, folder)
    for path in folder.iterdir():
        path.chmod(0o644)
    return folder


def image_tree(root, classes=("cat", "dog", "eel"), per_class=6, split=None, size=(20, 24)):
    """An image folder of tiny PNGs (height x width `size`) under `root`: `per_class` images of
    each class, each class tinted its own colour channel so that a model can learn them apart,
    in root/CLASS or, with `split`, in root/split/CLASS. Returns `root`."""
    import numpy as np
    from PIL import Image

    generator = np.random.default_rng(len(classes) * per_class)
    for label, name in enumerate(classes):
        folder = Path(root, *([split] if split else []), name)
        folder.mkdir(parents=True, exist_ok=True)
        for index in range(per_class):
            pixels = generator.integers(0, 80, (*size, 3), dtype=np.uint8)
            pixels[..., label % 3] += 160
            Image.fromarray(pixels).save(folder / f"{index}.png")
    return Path(root)


def read_results(path):
    """A results file as utils.report holds it: checked, and its comparison computed again from
    its runs (the file holds each row as a dict, the code as a ComparisonRow)."""
    from utils.results import merge
    (document,) = merge.merge(merge.load_result(path))
    return document


def third_repeat(documents, factor=1.0):
    """Results `documents` as --repeats 3 would have left them: each run of repeat 0 again as
    repeat 2, its steps `factor` times as long (what the adviser needs for an interval)."""
    import copy
    changed = copy.deepcopy(documents)
    for found in changed:
        for run in [run for run in found["runs"] if run.get("repeat") == 0]:
            again = copy.deepcopy(run)
            again.update(repeat=2, finished_utc=run["finished_utc"] + "r2",
                         step_times_ms=[ms * factor for ms in run["step_times_ms"]],
                         step_time_ms={key: value * factor for key, value in run["step_time_ms"].items()})
            found["runs"].append(again)
    return changed


def fake_run(mode, step_ms, losses, accuracy, repeat=0):
    """A run record with what utils.results.compare reads, for comparisons built without training."""
    return {"mode": mode, "data": "cifar10", "repeat": repeat, "step_time_ms": {"median": step_ms, "p90": step_ms},
            "step_times_ms": [step_ms * (1 + 0.01 * (i % 5)) for i in range(40)], "global_batch_size": 8,
            "data_time_ms": {"median": 0.1}, "peak_memory_bytes": 1 << 20, "final_loss": losses[-1],
            "loss_curve": losses, "test_accuracy": accuracy, "skipped_steps": 0, "final_loss_scale": None}


class FakeGpu:
    """A GPU as a made-up NVML shows it: its NVML index, its PCI bus id, and the readings its
    energy counter (millijoules) and power (milliwatts) give, each a function called once per
    reading, and its utilization samples, a function giving the (stamp in microseconds, percent
    busy) pairs the driver's buffer holds at each call; each None where the GPU has no such
    reading (NVML says NotSupported)."""

    def __init__(self, index, bus_id, energy=None, power=None, utilization=None):
        self.index, self.bus_id, self.energy, self.power, self.utilization = index, bus_id, energy, power, utilization


class NVMLError(Exception):
    """The made-up NVML's errors, named as pynvml names them."""


class NVMLError_NotSupported(NVMLError):
    pass


class NVMLError_NotFound(NVMLError):
    pass


def fake_nvml(*gpus, init_error=None):
    """A module standing in for nvidia-ml-py's pynvml, with the calls utils/measure/nvml_meter.py
    makes; `opened` counts nvmlInit calls not yet shut down."""
    module = types.ModuleType("pynvml")

    def init():
        if init_error:
            raise NVMLError(init_error)
        module.opened += 1

    def shutdown():
        module.opened -= 1

    def found(gpu, where):
        if gpu is None:
            raise NVMLError(f"Not Found ({where})")
        return gpu

    def read(gpu, kind):
        if getattr(gpu, kind) is None:
            raise NVMLError_NotSupported("Not Supported")
        return getattr(gpu, kind)()

    def samples(gpu, kind, last_seen):
        """nvmlDeviceGetSamples: (value type, the buffered samples stamped after last_seen), or
        NotFound when there are none, as NVML answers."""
        assert kind == module.NVML_GPU_UTILIZATION_SAMPLES
        newer = [(stamp, busy) for stamp, busy in read(gpu, "utilization") if stamp > last_seen]
        if not newer:
            raise NVMLError_NotFound("Not Found")
        return 1, [types.SimpleNamespace(timeStamp=stamp, sampleValue=types.SimpleNamespace(uiVal=busy))
                   for stamp, busy in newer]

    module.__dict__.update(
        NVMLError=NVMLError, NVMLError_NotSupported=NVMLError_NotSupported, NVMLError_NotFound=NVMLError_NotFound,
        NVML_GPU_UTILIZATION_SAMPLES=1, opened=0, nvmlInit=init, nvmlShutdown=shutdown,
        nvmlDeviceGetIndex=lambda gpu: gpu.index,
        nvmlDeviceGetHandleByPciBusId=lambda bus: found(next((g for g in gpus if g.bus_id == bus), None), bus),
        nvmlDeviceGetHandleByIndex=lambda index: found(next((g for g in gpus if g.index == index), None), index),
        nvmlDeviceGetTotalEnergyConsumption=lambda gpu: read(gpu, "energy"),
        nvmlDeviceGetPowerUsage=lambda gpu: read(gpu, "power"), nvmlDeviceGetSamples=samples)
    return module


@pytest.fixture
def install_nvml(monkeypatch):
    """A function that puts a made-up NVML of the given FakeGpus where `import pynvml` finds it
    and returns it; no CUDA_VISIBLE_DEVICES renumbers the GPUs."""
    def install(*gpus, init_error=None):
        module = fake_nvml(*gpus, init_error=init_error)
        monkeypatch.setitem(sys.modules, "pynvml", module)
        return module
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return install


def command_line(pid):
    """The command line of process `pid`, as /proc holds it (b"" once it has ended)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as found:
            return found.read()
    except OSError:
        return b""


def processes_naming(text):
    """The pids of the processes whose command line holds `text`."""
    return [int(name) for name in os.listdir("/proc") if name.isdigit() and text.encode() in command_line(name)]


def alive_after(pids, seconds):
    """Those of `pids` still running `seconds` from now (waiting less once none is)."""
    import time

    from utils.children import alive

    deadline = time.monotonic() + seconds
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [pid for pid in pids if alive(pid)]
