"""The property-based hostile-file campaign. Hypothesis generates CIFAR-10 batch files
(random pickle opcodes, forged numpy dtypes and arrays, wrong types, extreme values, damaged
genuine files) and checkpoints (entries replaced by wrong types, shapes and extreme values,
entries removed, flipped bytes, truncation, code-running pickles). ampbench's own readers,
in a separate process (tests/campaigns/hostile_worker.py, so that a segfault fails the test instead of
killing pytest), must answer every one with valid tensors or a clean refusal: never another
exception, a crash, or a side effect. Result files for utils.report (a genuine one with keys
dropped, values of other types, NaN, huge or negative numbers put in, or damaged bytes) are
read in this process (no native code): exit 0 or 2 with one sentence, nothing else.

The examples are derandomized (the same campaign on every run); set HOSTILE_EXAMPLES=N and
HOSTILE_RANDOM=1 to run a larger, fresh campaign."""
import json
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import main
from conftest import ROOT

pytestmark = pytest.mark.long  # its own CI stage (pytest.ini)

MARKER = "/tmp/ampbench-hostile-marker"
EXAMPLES = int(os.environ.get("HOSTILE_EXAMPLES", "0"))
CAMPAIGN = settings(deadline=None, derandomize=not os.environ.get("HOSTILE_RANDOM"),
                    suppress_health_check=list(HealthCheck), database=None)


class Worker:
    """tests/campaigns/hostile_worker.py, started once, asked about one file at a time."""

    def __init__(self, kind):
        self.process = subprocess.Popen([sys.executable, str(ROOT / "tests" / "campaigns" / "hostile_worker.py"), kind],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT)
        assert self.process.stdout.readline().strip() == "ready"
        self.answers = []

    def ask(self, path, content):
        path.write_bytes(content)
        self.process.stdin.write(f"{path}\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline().strip()
        assert answer, f"the reader crashed (exit {self.process.wait()}) on {content[:300]!r}"
        self.answers.append(answer)
        assert answer == "valid" or answer.startswith("refused: "), f"{answer}\non {content[:300]!r}"
        assert "Traceback" not in answer and " ();" not in answer and "weights_only" not in answer, answer
        assert not os.path.exists(MARKER), "a file ran code"
        return answer

    def close(self):
        self.process.stdin.close()
        assert self.process.wait(timeout=60) == 0


# --- batch files --------------------------------------------------------------------------

class Forged:
    """Pickles as `call(*args)` followed by BUILD(state): how numpy pickles dtypes and arrays."""

    def __init__(self, call, args, state):
        self.call, self.args, self.state = call, args, state

    def __reduce__(self):
        return self.call, self.args, self.state


class RunsCode:
    def __init__(self, call):
        self.call = call

    def __reduce__(self):
        return self.call, (f"touch {MARKER}",)


RECONSTRUCT = np.array(0).__reduce__()[0]
DTYPE_CODES = ["u1", "|u1", "i1", "<u2", ">i4", "i8", "O8", "O", "V8", "f4", "S4", "U2", "M8", "b1", "c8", "x", ""]
GLOBALS = [b"numpy.core.multiarray\n_reconstruct", b"numpy._core.multiarray\n_reconstruct", b"numpy\ndtype",
           b"numpy\nndarray", b"_codecs\nencode", b"__builtin__\nbytes", b"builtins\nbytes", b"os\nsystem",
           b"posix\nsystem", b"builtins\neval", b"builtins\ngetattr", b"subprocess\ncall", b"builtins\nopen"]
OPCODES = st.one_of(
    st.sampled_from([b"(", b"}", b"]", b")", b"t", b"s", b"u", b"a", b"e", b"R", b"b", b"0", b"2", b"N", b"\x88",
                     b"\x89", b"\x85", b"\x86", b"\x87", b"1", b".", b"\x81", b"\x94", b"\x93"]),
    st.integers(0, 255).map(lambda n: b"K" + bytes([n])),
    st.integers(-2 ** 31, 2 ** 31 - 1).map(lambda n: b"J" + n.to_bytes(4, "little", signed=True)),
    st.binary(max_size=40).map(lambda b: b"C" + bytes([len(b)]) + b),
    st.text(max_size=20).map(lambda t: b"X" + len(t.encode()).to_bytes(4, "little") + t.encode()),
    st.sampled_from(GLOBALS).map(lambda g: b"c" + g + b"\n"),
    st.integers(0, 5).map(lambda n: b"q" + bytes([n])), st.integers(0, 5).map(lambda n: b"h" + bytes([n])),
    st.binary(min_size=1, max_size=8))
dtype_states = st.tuples(st.sampled_from([3, 4, 2]), st.sampled_from(["|", "<", ">", "=", "x"]),
                         st.sampled_from([None, (np.dtype("u1"), (2,))]), st.sampled_from([None, ("a",)]),
                         st.sampled_from([None, {"a": (np.dtype(object), 0)}]), st.sampled_from([-1, 1, 8, 2 ** 62]),
                         st.sampled_from([-1, 1, 8]), st.sampled_from([0, 1, 16, 63]))
forged_arrays = st.builds(
    lambda code, state, shape, fortran, raw: Forged(RECONSTRUCT, (np.ndarray, (0,), b"b"),
                                                    (1, shape, Forged(np.dtype, (code, False, True), state),
                                                     fortran, raw)),
    st.sampled_from(DTYPE_CODES), dtype_states,
    st.one_of(st.tuples(st.integers(0, 4), st.sampled_from([3072, 8, 0])), st.tuples(st.integers(-1, 2 ** 40)),
              st.just(()), st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 3))),
    st.booleans(), st.binary(max_size=3072 * 2))
numpy_arrays = hnp.arrays(dtype=st.sampled_from([np.uint8, np.int8, np.int16, np.int64, np.float32, np.bool_,
                                                 np.dtype(">u2"), np.float64]),
                          shape=hnp.array_shapes(min_dims=0, max_dims=3, max_side=6))
plausible_data = st.integers(0, 3).flatmap(
    lambda n: st.binary(min_size=n * 3072, max_size=n * 3072).map(
        lambda raw: np.frombuffer(raw, dtype=np.uint8).reshape(n, 3072)))
values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70), st.floats(), st.text(max_size=10),
              st.binary(max_size=10), numpy_arrays, forged_arrays, plausible_data,
              st.lists(st.integers(-3, 12), max_size=5).map(lambda items: np.array(items, dtype=object)),
              st.sampled_from([RunsCode(os.system), RunsCode(eval)])),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=6)
labels = st.one_of(st.lists(st.integers(-2, 12), max_size=4), st.lists(st.integers(-2 ** 64, 2 ** 64), max_size=3),
                   values)
batch_dicts = st.fixed_dictionaries({"data": st.one_of(plausible_data, values), "labels": labels},
                                    optional={"batch_label": st.text(max_size=5), "filenames": values})


def genuine_batch():
    rng = np.random.default_rng(0)
    return pickle.dumps({"batch_label": "b", "labels": [3, 7], "data": rng.integers(0, 256, (2, 3072), dtype=np.uint8),
                         "filenames": ["a.png", "b.png"]}, protocol=2)


def damaged(content):
    """A strategy of byte-level damage to `content`: flips, cuts, insertions."""
    edit = st.tuples(st.sampled_from(["flip", "cut", "insert", "truncate"]), st.integers(0, len(content) - 1),
                     st.binary(min_size=1, max_size=16))

    def apply(edits):
        data = bytearray(content)
        for kind, at, junk in edits:
            at = min(at, len(data) - 1) if data else 0
            if kind == "flip" and data:
                data[at] ^= junk[0] or 1
            elif kind == "cut":
                del data[at:at + len(junk)]
            elif kind == "insert":
                data[at:at] = junk
            else:
                del data[at:]
        return bytes(data)
    return st.lists(edit, min_size=1, max_size=4).map(apply)


batch_files = st.one_of(
    st.tuples(batch_dicts, st.integers(0, pickle.HIGHEST_PROTOCOL)).map(lambda t: pickle.dumps(t[0], protocol=t[1])),
    st.lists(OPCODES, max_size=30).map(lambda ops: b"\x80\x02" + b"".join(ops) + b"."),
    damaged(genuine_batch()))


@pytest.fixture
def batch_worker():
    if os.path.exists(MARKER):
        os.remove(MARKER)
    worker = Worker("batch")
    yield worker
    worker.close()


def test_hostile_batch_files_are_read_or_refused(batch_worker, tmp_path):
    @settings(CAMPAIGN, max_examples=EXAMPLES or 400)
    @given(batch_files)
    def campaign(content):
        batch_worker.ask(tmp_path / "data_batch_1", content)
    campaign()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data_batch_1"], "nothing else appeared"
    refused = sum(a.startswith("refused") for a in batch_worker.answers)
    print(f"hostile batch files: {len(batch_worker.answers)} cases, {refused} refused, "
          f"{len(batch_worker.answers) - refused} valid")


# --- checkpoints --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def genuine_checkpoint(tmp_path_factory):
    """A checkpoint of the run hostile_worker.py resumes: squeezenet1_1, batch 4, synthetic data."""
    path = tmp_path_factory.mktemp("genuine") / "c.pt"
    argv = ["--model", "squeezenet1_1", "-b", "4", "-n", "3", "--warmup", "1", "--data", "synthetic",
            "--no-progress", "--checkpoint", str(path)]
    assert main.main(argv) == 0
    return path


def key_paths(state, prefix=(), depth=3):
    """Every (key, ...) path, up to `depth` + 1 keys long, into nested dicts and lists."""
    for key, value in (state.items() if isinstance(state, dict) else enumerate(state)):
        yield prefix + (key,)
        if isinstance(value, (dict, list)) and len(prefix) < depth:
            yield from key_paths(value, prefix + (key,), depth)


tensors = st.builds(
    lambda dtype, shape, fill: torch.full(shape, fill).to(dtype),
    st.sampled_from([torch.float32, torch.float16, torch.int64, torch.uint8, torch.bool, torch.float64]),
    st.lists(st.integers(0, 3), max_size=3).map(tuple),
    st.sampled_from([0.0, 1.0, -1.0, float("inf"), float("nan"), 3e38, 255.0]))
replacements = st.one_of(st.none(), st.booleans(), st.integers(-2 ** 63, 2 ** 63 - 1), st.floats(),
                         st.text(max_size=8), tensors, st.lists(st.integers(), max_size=3),
                         st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
                         st.just("delete"))


def mutated_checkpoints(genuine):
    state = torch.load(genuine, weights_only=False)  # the test's own file
    paths = list(key_paths(state))

    def apply(edits):
        copy = torch.load(genuine, weights_only=False)
        for path, value in edits:
            *parents, last = path
            holder = copy
            try:
                for key in parents:
                    holder = holder[key]
                if value == "delete" and isinstance(holder, dict):
                    del holder[last]
                elif not (isinstance(holder, list) and value == "delete"):
                    holder[last] = value
            except (KeyError, IndexError, TypeError):  # an earlier edit removed or replaced the path
                pass
        import io
        buffer = io.BytesIO()
        torch.save(copy, buffer)
        return buffer.getvalue()
    edit = st.tuples(st.sampled_from(paths), replacements)
    return st.lists(edit, min_size=1, max_size=3).map(apply)


class Crafted:
    def __reduce__(self):
        return os.system, (f"touch {MARKER}",)


def crafted_checkpoint():
    import io
    buffer = io.BytesIO()
    torch.save({"format": "ampbench.checkpoint/1", "model": Crafted()}, buffer)
    return buffer.getvalue()


def test_hostile_checkpoints_are_loaded_or_refused(genuine_checkpoint, tmp_path):
    if os.path.exists(MARKER):
        os.remove(MARKER)
    worker = Worker("checkpoint")
    genuine = genuine_checkpoint.read_bytes()
    assert worker.ask(tmp_path / "c.pt", genuine) == "valid", "the genuine checkpoint resumes"

    @settings(CAMPAIGN, max_examples=EXAMPLES or 150)
    @given(st.one_of(mutated_checkpoints(genuine_checkpoint), damaged(genuine), st.just(crafted_checkpoint())))
    def campaign(content):
        worker.ask(tmp_path / "c.pt", content)
    campaign()
    worker.close()
    refused = sum(a.startswith("refused") for a in worker.answers)
    print(f"hostile checkpoints: {len(worker.answers)} cases, {refused} refused, "
          f"{len(worker.answers) - refused} valid")


# --- result files (utils.report) ------------------------------------------------------------

GENUINE_RESULT = ROOT / "tests" / "unit" / "results" / "data" / "explained.json"
hostile_values = st.one_of(
    st.none(), st.booleans(), st.text(max_size=6), st.sampled_from([0, -1, 10 ** 400, -(10 ** 20), 2 ** 63]),
    st.floats(), st.sampled_from([[], {}, [[[[1]]]], ["x"], {"median": 0}]),
    st.lists(st.one_of(st.floats(), st.integers(), st.text(max_size=2)), max_size=3), st.just("delete"))


def mutated_results(document):
    """Valid result files with keys dropped, values of other types, NaN, huge or negative
    numbers put in: the text of the mutated document, as strict JSON or with NaN literals."""
    paths = list(key_paths(document, depth=6))

    def apply(edits):
        copy = json.loads(json.dumps(document))
        for path, value in edits:
            *parents, last = path
            holder = copy
            try:
                for key in parents:
                    holder = holder[key]
                if value == "delete":
                    del holder[last]
                else:
                    holder[last] = value
            except (KeyError, IndexError, TypeError):  # an earlier edit removed or replaced the path
                pass
        return json.dumps(copy).encode()
    return st.lists(st.tuples(st.sampled_from(paths), hostile_values), min_size=1, max_size=4).map(apply)


def report_main(path):
    """utils.report's main on `path` in this process: its exit status and stderr."""
    import contextlib
    import io

    from utils import report
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        return report.main([str(path)]), err.getvalue()


def test_hostile_result_files_are_reported_or_refused(tmp_path):
    document = json.loads(GENUINE_RESULT.read_text())
    genuine, answers = GENUINE_RESULT.read_bytes(), []

    @settings(CAMPAIGN, max_examples=EXAMPLES or 300)
    @given(st.one_of(mutated_results(document), damaged(genuine)))
    def campaign(content):
        path = tmp_path / "r.json"
        path.write_bytes(content)
        status, err = report_main(path)
        answers.append(status)
        assert status in (0, 2), f"exit {status}: {err}\non {content[:300]!r}"
        assert status == 0 or (err.startswith("utils.report: error: ") and err.count("\n") == 1), err
    campaign()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"], "nothing else appeared"
    print(f"hostile result files: {len(answers)} cases, {answers.count(2)} refused, {answers.count(0)} reported")
