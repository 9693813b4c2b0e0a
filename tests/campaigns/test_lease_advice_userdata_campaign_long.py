"""The slow cases of the hostile campaign of test_lease_advice_userdata_campaign.py: each a
process of its own, as a user starts it, stopped by a signal at a phase it reaches (a factory that
never returns, the decoding of an image folder, --advise's preflight and phases, compilation), two
at once into one folder, or on a full disk. Long: some two dozen processes, a few minutes."""
import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT, image_tree

pytestmark = pytest.mark.long

HEADLINE = ROOT / "results" / "NVIDIA-H200" / "2026-11-26" / "headline-resnet18.json"
OWN = ["--image-size", "16", "-b", "4", "--warmup", "1", "--no-progress", "--workers", "0"]
ADVISE = ["--image-size", "16", "-b", "4", "--no-progress", "--workers", "0"]  # --advise chooses the warm-up
# hostile_models beside what conftest puts on the path
PATHS = [str(ROOT / "tests" / "campaigns"), *filter(None, [os.environ.get("PYTHONPATH")])]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(PATHS)}


def start(*argv, file_size=None, env=None):
    """`python main.py ARGV` from the checkout, its output read as it comes."""
    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))
    return subprocess.Popen([sys.executable, str(ROOT / "main.py"), *map(str, argv)], cwd=ROOT, env=env or ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            preexec_fn=limit if file_size else None)


def kill(process):
    """The process and all it started (a DataLoader worker holds its output open): a case that failed."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def wait_for(process, words, seconds=240):
    """The output up to the first line holding `words`; fails if the process ends or `seconds` pass first."""
    seen, deadline = [], time.monotonic() + seconds
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        seen.append(line)
        if words in line:
            return "".join(seen)
    kill(process)
    pytest.fail(f"{words!r} never came: {''.join(seen)[-1500:]}")


def ended(process, seconds):
    """(exit status, the rest of its output) once it ends; killed, and the case failed, after `seconds`."""
    try:
        out, _ = process.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        kill(process)
        out, _ = process.communicate()
        pytest.fail(f"still running {seconds} s after the signal: {out[-1500:]}")
    return process.returncode, out


def closing(out):
    return (out.strip().splitlines() or [""])[-1]


@pytest.mark.parametrize("case, name, number", [
    ("factory-waiting-forever-gets-sigterm", "hangs", signal.SIGTERM),
    ("factory-spinning-forever-gets-sigint", "spins", signal.SIGINT),
    ("factory-waiting-forever-gets-sighup", "hangs", signal.SIGHUP),
])
def test_a_factory_that_never_returns_ends_at_the_first_stop_signal(case, name, number, tmp_path):
    process = start("--model-factory", f"hostile_models:{name}", "--data", "synthetic", *OWN, "-n", "3", "--json",
                    tmp_path / "r.json")
    wait_for(process, "the factory waits")
    process.send_signal(number)
    status, out = ended(process, 15)
    assert status == 128 + number and "Traceback" not in out, out
    assert closing(out).startswith(f"main.py: {signal.Signals(number).name} received while building "), out
    assert not (tmp_path / "r.json").exists()


def test_a_model_that_hangs_in_training_is_ended_by_a_second_signal_keeping_nothing_half_written(tmp_path):
    process = start("--model-factory", "hostile_models:HangsInTraining", "--data", "synthetic", *OWN, "-n", "8",
                    "--json", tmp_path / "r.json")
    wait_for(process, "the model hangs")
    process.send_signal(signal.SIGTERM)
    time.sleep(2)
    process.send_signal(signal.SIGTERM)
    status, out = ended(process, 15)
    assert status == 143 and "a second signal (SIGTERM) arrived: stopping now" in out and "Traceback" not in out
    assert not (tmp_path / "r.json").exists() and not list(tmp_path.glob("*.tmp*"))


@pytest.fixture(scope="module")
def big_tree(tmp_path_factory):
    """A tree whose decoding takes several seconds: 4 classes of 300 PNGs of 256x256 noise."""
    return image_tree(tmp_path_factory.mktemp("big") / "tree", classes=("a", "b", "c", "d"), per_class=300,
                      size=(256, 256))


@pytest.mark.parametrize("case, workers", [("images-sigint-while-decoding-in-this-process", "0"),
                                           ("images-sigint-while-two-workers-decode", "2")])
def test_a_stop_signal_while_decoding_an_image_folder_ends_it_at_once(case, workers, big_tree, tmp_path):
    process = start("--model-factory", "hostile_models:tiny", "--data", "imagefolder", "--data-dir", big_tree,
                    "--image-size", "224", "-b", "4", "-n", "2", "--workers", workers, "--json", tmp_path / "r.json")
    wait_for(process, "decoding 1080 training and 120 evaluation images")
    process.send_signal(signal.SIGINT)
    started = time.monotonic()
    status, out = ended(process, 30)
    assert status == 130 and "Traceback" not in out and time.monotonic() - started < 5, out
    assert closing(out).startswith("main.py: SIGINT received while decoding"), out
    assert not (tmp_path / "r.json").exists()


def test_a_fifo_in_an_image_folder_read_by_workers_is_refused(tmp_path):
    tree = image_tree(tmp_path / "tree", per_class=4)
    os.mkfifo(tree / "cat" / "pipe.png")
    process = start("--model-factory", "hostile_models:tiny", "--data", "imagefolder", "--data-dir", tree, *OWN[:-2],
                    "--workers", "2", "-n", "2")
    status, out = ended(process, 120)
    assert status == 2 and "pipe.png cannot be read as an image" in closing(out), out


def test_advise_with_a_factory_that_never_returns_ends_at_its_first_signal(tmp_path):
    process = start("--advise", "--model-factory", "hostile_models:hangs", "--data", "synthetic", *ADVISE, "--budget",
                    "5", "--advice-dir", tmp_path / "advice")
    wait_for(process, "the factory waits")
    process.send_signal(signal.SIGINT)
    status, out = ended(process, 15)
    assert status == 130 and "Traceback" not in out, out
    assert not (tmp_path / "advice" / "advice.json").exists()


def test_advise_with_a_factory_that_never_returns_ends_at_its_budget(tmp_path):
    started = time.monotonic()
    process = start("--advise", "--model-factory", "hostile_models:hangs", "--data", "synthetic", *ADVISE, "--budget",
                    "0.3", "--advice-dir", tmp_path / "advice")
    status, out = ended(process, 120)
    assert status == 2 and "--budget 0.3" in closing(out) and "Traceback" not in out, out
    assert time.monotonic() - started < 0.3 * 60 + 15


@pytest.mark.parametrize("after_s", [0, 4])  # as the phase's main.py starts (before its first step), or in it
def test_advise_stopped_in_a_phase_advises_from_what_it_measured_and_says_so(after_s, tmp_path):
    process = start("--advise", "--model-factory", "hostile_models:tiny", "--data", "synthetic", *ADVISE, "--budget",
                    "2", "--advice-dir", tmp_path / "advice")
    wait_for(process, "main.py --advise: channels-last: ")  # the comparison has ended: there is a mode to advise
    time.sleep(after_s)
    process.send_signal(signal.SIGINT)
    status, out = ended(process, 90)
    assert status == 130 and "Traceback" not in out, out
    advice = json.loads((tmp_path / "advice" / "advice.json").read_text())
    stopped = {name: entry["why"] for name, entry in advice["not_run"].items() if name != "accuracy"}  # synthetic
    assert stopped and all(why.startswith(("stopped by SIGINT", "SIGINT stopped it")) for why in stopped.values()), \
        stopped


def test_advise_on_a_model_that_hangs_mid_comparison_ends_within_its_budget_and_the_grace(tmp_path):
    started = time.monotonic()
    process = start("--advise", "--model-factory", "hostile_models:HangsInTraining", "--data", "synthetic", *ADVISE,
                    "--budget", "0.5", "--advice-dir", tmp_path / "advice")
    status, out = ended(process, 0.5 * 60 + 90)
    assert status == 2 and "the comparison's run failed" in closing(out) and "Traceback" not in out, out
    assert time.monotonic() - started < 0.5 * 60 + 60


def test_two_advise_from_into_one_folder_at_once_leave_one_whole_advice(tmp_path):
    processes = [start("--advise", "--from", HEADLINE, "--advice-dir", tmp_path / "advice") for _ in range(4)]
    for process in processes:
        status, out = ended(process, 240)
        assert status == 5 and "Traceback" not in out, out  # the H200's headline is unsteady: no advice yet
    advice = json.loads((tmp_path / "advice" / "advice.json").read_text())
    assert advice["status"] == "unsteady"
    assert sorted(path.name for path in (tmp_path / "advice").iterdir()) == ["advice.json", "report.txt"]


def test_advise_from_onto_a_full_disk_keeps_the_earlier_advice_whole(tmp_path):
    folder = tmp_path / "advice"
    assert ended(start("--advise", "--from", HEADLINE, "--advice-dir", folder), 240)[0] == 5
    before = {path.name: path.read_bytes() for path in folder.iterdir()}
    status, out = ended(start("--advise", "--from", HEADLINE, "--advice-dir", folder, file_size=3000), 240)
    assert status == 1 and "could not write" in closing(out) and "kept as it was" in closing(out), out
    assert {path.name: path.read_bytes() for path in folder.iterdir()} == before


def test_advise_into_a_read_only_folder_is_refused_before_the_preflight(tmp_path):
    folder = tmp_path / "advice"
    folder.mkdir()
    if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode:
        folder.chmod(0o555)
    try:
        started = time.monotonic()
        status, out = ended(start("--advise", "--model-factory", "hostile_models:tiny", "--data", "synthetic", *ADVISE,
                                  "--advice-dir", folder), 120)
    finally:
        subprocess.run(["chattr", "-i", str(folder)], capture_output=True)
    assert status == 2 and "cannot write --advice-dir" in closing(out) and "plan for" not in out, out
    assert time.monotonic() - started < 60


@pytest.mark.parametrize("case, budget", [("advise-budget-a-billionth-of-a-minute", "1e-9"),
                                          ("advise-budget-a-hundredth-of-a-minute", "0.01")])
def test_advise_with_a_budget_below_one_comparison_is_refused_after_its_preflight(case, budget, tmp_path):
    status, out = ended(start("--advise", "--model-factory", "hostile_models:tiny", "--data", "synthetic", *ADVISE,
                              "--budget", budget, "--advice-dir", tmp_path / "advice"), 120)
    said = closing(out)
    assert status == 2 and f"--budget {float(budget):g} " in said and ("give --budget" in said or "a larger --budget"
                                                                         in said), out
    assert not (tmp_path / "advice").exists()


def test_a_compiling_run_stopped_during_its_compilation_keeps_its_results(tmp_path):
    cold = {**ENV, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}  # a warm cache compiles in a second
    process = start("--model-factory", "hostile_models:tiny", "--data", "synthetic", *OWN[:-3], "--workers", "0",
                    "-n", "50", "--compile", "--json", tmp_path / "r.json", env=cold)  # progress lines on
    wait_for(process, "data loaded")
    time.sleep(3)  # torch.compile of the first step, with nothing cached, takes ten seconds or more on a CPU
    process.send_signal(signal.SIGTERM)
    status, out = ended(process, 240)
    assert status == 143 and "Traceback" not in out, out
    document = json.loads((tmp_path / "r.json").read_text())
    assert document["incomplete"] and document["runs"][0]["stopped_by"] == "SIGTERM"


def test_two_renders_into_one_readme_at_once_leave_it_whole(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# x\n\n## Results\n")
    folder = ROOT / "results" / "NVIDIA-H200" / "2026-11-26"
    command = [sys.executable, str(ROOT / "benchmarks" / "gpu_suite.py"), "--render", str(folder), "--readme",
               str(readme)]
    before = {path: path.read_bytes() for path in folder.rglob("*") if path.is_file()}
    processes = [subprocess.Popen(command, cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, start_new_session=True) for _ in range(3)]
    for process in processes:
        status, out = ended(process, 240)
        assert status == 0, out
    text = readme.read_text()
    assert text.count("<!-- gpu-suite:begin") == 1 and text.count("<!-- gpu-suite:end") == 1
    assert {path: path.read_bytes() for path in folder.rglob("*") if path.is_file()} == before


def test_a_results_file_of_300_mib_given_to_from_is_refused_without_reading_it_all(tmp_path):
    path = tmp_path / "huge.json"
    with open(path, "wb") as f:
        f.truncate(300 << 20)  # sparse: nothing written to the disk
    status, out = ended(start("--advise", "--from", path), 120)
    assert status == 2 and "larger than 256 MiB" in closing(out), out


def test_a_head_of_two_billion_classes_says_what_took_the_memory(tmp_path):
    status, out = ended(start("-m", "resnet18", "--data", "synthetic", "--num-classes", str(2 ** 31 - 1), "-b", "2",
                              "-n", "2", "--no-progress"), 120)
    assert status == 2 and "fewer --num-classes than 2147483647" in closing(out), out

