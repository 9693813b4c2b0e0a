"""User errors end in one sentence and exit 2, never a traceback: batch sizes the model or
the data cannot serve, out-of-memory, outputs that cannot be written after training, and CSV
files that are not text. Most cases run main.main in this process (as
`python main.py` does), where a traceback fails the test."""
import errno
import json
import resource
import subprocess
import sys

import pytest

from conftest import ROOT, run_main
from utils.results import files

TINY = ["--model", "squeezenet1_1", "-n", "3", "--warmup", "1", "--no-progress", "--data", "synthetic"]


@pytest.mark.parametrize("argv, phrase", [
    (["--model", "resnet18", "--stem", "imagenet", "-b", "1", "-n", "3", "--warmup", "1", "--data", "synthetic"],
     "has a batch norm that sees 1 value per channel of each 32x32 image, so training needs a batch of at least 2"),
    ([*TINY, "-b", "60000"], "a batch of 60000 images is more than the 50000 training images hold"),
    (["--model", "squeezenet1_1", "-b", "4", "--warmup", "1", "--data", "synthetic", "--epochs", "1e30"],
     "steps, more than the 2147483647 a run can count"),
])
def test_batches_and_lengths_the_run_cannot_serve(argv, phrase):
    result = run_main(*argv)
    status, err = result.returncode, result.stderr
    assert status == 2 and phrase in err, err


@pytest.mark.parametrize("argv, said", [
    (["--timing-warmup", "300", "-n", "10"], "--timing-warmup (300) must be smaller than the 10 steps to run so that "
                                             "some steps are timed; lower --timing-warmup or raise -n."),
    (["--warmup", "300", "--steps", "10"], "--warmup (300) must be smaller than the 10 steps to run so that some "
                                           "steps are timed; lower --warmup or raise --steps."),
    (["--lr-warmup-steps", "20", "-n", "10"], "--lr-warmup-steps (20) must be smaller than the 10 steps to run."),
    (["--warmup-lr-steps", "20", "-n", "10"], "--warmup-lr-steps (20) must be smaller than the 10 steps to run."),
    (["-n", "1", "--compile"], "--compile needs --timing-warmup 1 or more"),  # none typed: the current name
], ids=["timing-warmup", "warmup", "lr-warmup-steps", "warmup-lr-steps", "untyped"])
def test_a_refusal_names_the_flag_as_the_user_typed_it(argv, said):
    result = run_main(*TINY[:2], "--data", "synthetic", *argv)
    assert result.returncode == 2 and said in result.stderr, result.stderr
    for earlier, current in (("--warmup", "--timing-warmup"), ("--warmup-lr-steps", "--lr-warmup-steps")):
        unsaid = current if earlier in argv else earlier  # the spelling not typed; untyped: the earlier one
        assert f"{unsaid} " not in result.stderr, result.stderr


@pytest.mark.long  # a process of its own, killed or limited: the long stage keeps the main suite short
def test_out_of_memory_names_the_batch_and_the_peak():
    """A real allocation failure: the address space is capped so that a large batch cannot fit."""
    limit = 6 * 2 ** 30

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    result = subprocess.run([sys.executable, str(ROOT / "main.py"), "--model", "resnet18", "-b", "2000", *TINY[2:]],
                            capture_output=True, text=True, preexec_fn=cap, timeout=300)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert "out of memory on CPU with a batch of 2000 images (peak" in result.stderr
    assert "lower --batch-size/-b" in result.stderr


@pytest.mark.long  # a process of its own, limited, training at 1024x1024: about 10 s on 2 cores
def test_synthetic_data_at_1024_fits_where_a_batch_of_2_does():
    """4,096 synthetic images of 1024x1024 took 12.0 GiB, and under an 8 GiB address space the run
    said a batch of 2 did not fit: they hold CIFAR-10's bytes now, and the run trains."""
    limit = 8 * 2 ** 30

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    result = subprocess.run([sys.executable, str(ROOT / "main.py"), *TINY, "-b", "2", "--image-size", "1024"],
                            capture_output=True, text=True, preexec_fn=cap, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]


# What torch's CPU allocator raises when an allocation fails.
CPU_ALLOCATOR = RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 12884901888 bytes. "
                             "Error code 12 (Cannot allocate memory)")


def fails_to_allocate(*args, **kwargs):
    raise CPU_ALLOCATOR


@pytest.mark.parametrize("where, phrase", [
    ("data", "out of memory on CPU loading the training data (--data synthetic), before the first step (peak "),
    ("model", "out of memory on CPU building the model squeezenet1_1 (peak "),
])
def test_out_of_memory_before_the_first_step_names_what_took_it_not_the_batch(where, phrase, monkeypatch):
    from models import factory
    from utils.data import dataset

    if where == "data":
        monkeypatch.setattr(dataset, "synthetic_images", fails_to_allocate)
    else:
        monkeypatch.setattr(factory, "build_model", fails_to_allocate)
    result = run_main(*TINY, "-b", "2")
    assert result.returncode == 2 and phrase in result.stderr and "batch" not in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_a_results_file_that_cannot_be_written_after_training_exits_1_and_keeps_the_old_one(tmp_path, monkeypatch):
    old = tmp_path / "r.json"
    old.write_text('{"earlier": "results"}\n')
    real_dumps = json.dumps

    def full_disk(*args, **kwargs):  # the temporary file is written, then the disk is full
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(files.json, "dumps", full_disk)
    result = run_main(*TINY, "-b", "4", "--json", old)
    status, err = result.returncode, result.stderr
    monkeypatch.setattr(files.json, "dumps", real_dumps)
    assert status == 1, err
    assert f"could not write {old} (No space left on device)" in err and "is kept as it was" in err
    assert old.read_text() == '{"earlier": "results"}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"], "no temporary file is left behind"


@pytest.mark.parametrize("content", [b"\x89PNG\r\n\x1a\n\x00\x00binary", b"\xff\xfe\x00h\x00i"])
def test_an_existing_csv_that_is_not_text_is_refused_before_training(content, tmp_path):
    csv = tmp_path / "all.csv"
    csv.write_bytes(content)
    result = run_main(*TINY, "-b", "4", "--csv", csv)
    status, err = result.returncode, result.stderr
    assert status == 2 and "cannot be appended to (it is not UTF-8 CSV text)" in err, err
    assert csv.read_bytes() == content


@pytest.mark.parametrize("flags, argv, outcome", [
    ([], ["--fp16", "-s"], "refused"),  # the classic call without -p: hours on such a CPU
    ([], ["--modes", "fp32,fp16-master"], "refused"),
    ([], ["--fp16", "-s", "--allow-slow-fp16"], "warned"),
    (["avx512_fp16"], ["--fp16", "-s"], "quiet"),
    (["amx_bf16"], ["--bf16"], "quiet"),
    ([], ["--bf16"], "warned"),  # bfloat16 without its instructions: slower, not hours: a line, no refusal
    ([], [], "quiet"),
])
def test_a_mode_this_cpu_cannot_run_fast_is_named_before_training(flags, argv, outcome, monkeypatch):
    from utils.training import cpu_arithmetic
    monkeypatch.setattr(cpu_arithmetic, "cpu_flags", lambda: flags)
    result = run_main(*TINY, "-b", "4", "-n", "2", *argv)
    slow = "this CPU has no fast"
    if outcome == "refused":
        assert result.returncode == 2 and "Traceback" not in result.stderr
        assert f"{slow} float16 arithmetic (neither avx512_fp16 nor amx_fp16" in result.stderr
        assert "add --allow-slow-fp16 to run it anyway" in result.stderr and "data loaded" not in result.stderr
    else:
        assert result.returncode == 0, result.stderr
        assert (f"main.py: warning: {slow}" in result.stderr) == (outcome == "warned"), result.stderr
