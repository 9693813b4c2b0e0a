"""utils.report reads nothing on trust: every field of a results document that the table, the
notes, the merge, the plot or the scaling study read is checked for its type and its range, and
against the fields it must agree with, before anything reads it. A forged copy of a committed
sample (docs/samples/*.json) is refused with exit 2 and one sentence naming the field, where it
used to print an impossible figure ("150.0% of the step's matmul FLOPs", "40 of 37 Linear
layers") or end in a traceback."""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

import pytest
from test_hostile_results import report

from conftest import ROOT

SAMPLES = ROOT / "docs" / "samples"
Document = Dict[str, Any]


def sample(name: str) -> Document:
    return json.loads((SAMPLES / f"{name}.json").read_text())


FP8_BLOCK = {"recipe": "tensorwise", "emulated": True, "linear_layers": 37, "converted_layers": 30,
             "fp8_flops_per_step": 1000, "flop_share": 0.62,
             "left_out": [{"layer": f"blocks.{index}.attn.out_proj", "why": "used directly by attention"}
                          for index in range(6)] + [{"layer": "head", "why": "the head"}],
             "matmul_shapes": [[256, 384, 1536]]}


def fp8_sample(mode: str = "fp8") -> Document:
    """why.json with its amp-bf16 run as a run of `mode`, with the fp8 block such a run records."""
    document = sample("why")
    run = document["runs"][1]
    run["mode"] = mode
    run["fp8"] = dict(copy.deepcopy(FP8_BLOCK), recipe={"fp8": "tensorwise", "fp8-rowwise": "rowwise"}[mode])
    return document


def ranks_sample() -> Document:
    """why.json as a job of two ranks whose gradients travelled in fp32 buckets of 25 MB."""
    document = sample("why")
    document["env"]["world_size"] = 2
    document["config"].update(grad_comm="fp32", bucket_mb=25.0)
    for run in document["runs"]:
        run.update(world_size=2, grad_comm="fp32", bucket_mb=25.0)
        run["profile"].update(comm_exposed_ms=1.5, wall_ms=run["profile"]["wall_ms"] or 40.0)
    return document


def target_sample() -> Document:
    """reading-the-numbers.json asked for a target accuracy that every run reached."""
    document = sample("reading-the-numbers")
    document["config"]["target_accuracy"] = 0.1
    for run in document["runs"]:
        run.update(target_accuracy=0.1, time_to_target_s=2.0, steps_to_target=20, epochs_to_target=0.5)
    return document


GENUINE: Dict[str, Callable[[], Document]] = {
    "why": lambda: sample("why"), "loss-scaling": lambda: sample("loss-scaling"),
    "reading-the-numbers": lambda: sample("reading-the-numbers"), "fp8": fp8_sample,
    "fp8-rowwise": lambda: fp8_sample("fp8-rowwise"), "ranks": ranks_sample, "target": target_sample}


def assert_read(name: str, folder: Path) -> None:
    """The variant `name` as committed or built above is read, and says what it holds."""
    path = folder / f"{name}.json"
    path.write_text(json.dumps(GENUINE[name]()))
    status, out, err = report(path)
    assert status == 0 and "median ms" in out, err
    words = " ".join(out.split())  # the notes wrap at 80 columns
    if name.startswith("fp8"):
        assert "30 of 37 Linear layers in FP8, 62.0% of the step's matmul FLOPs" in words, out
    if name == "ranks":
        assert "communication on 2 ranks (gradients in fp32)" in words, out


def run_of(index: int, **changed: Any) -> Callable[[Document], None]:
    return lambda document: document["runs"][index].update(changed)


def block_of(index: int, key: str, **changed: Any) -> Callable[[Document], None]:
    return lambda document: document["runs"][index][key].update(changed)


def config(**changed: Any) -> Callable[[Document], None]:
    return lambda document: document["config"].update(changed)


def numerics_of(index: int, *path: str, **changed: Any) -> Callable[[Document], None]:
    def edit(document: Document) -> None:
        found = document["runs"][index]["numerics"]
        for key in path:
            found = found[key]
        found.update(changed)
    return edit


def profile_without_wall_ms(document: Document) -> None:
    del document["runs"][0]["profile"]["wall_ms"]


def fewer_left_out(document: Document) -> None:
    del document["runs"][1]["fp8"]["left_out"][3:]


def timings(index: int, **changed: Any) -> Callable[[Document], None]:
    return lambda document: document["runs"][index]["step_time_ms"].update(changed)


FORGED: List[Tuple[str, str, Callable[[Document], None], str]] = [  # (what, variant, edit, the sentence's words)
    # the fp8 block the notes print
    ("FP8 share 1.5", "fp8", block_of(1, "fp8", flop_share=1.5),
     "runs[1].fp8.flop_share is 1.5, not a number of at most 1"),
    ("40 converted of 37 Linear layers", "fp8", block_of(1, "fp8", converted_layers=40),
     "runs[1].fp8.converted_layers is 40, more than its linear_layers (37)"),
    ("fewer left out than not converted", "fp8", fewer_left_out,
     "runs[1].fp8.left_out names 3 layers, fewer than the 7 Linear layers not converted"),
    ("fp8 recording rowwise", "fp8", block_of(1, "fp8", recipe="rowwise"),
     'runs[1].fp8.recipe is "rowwise", not mode fp8\'s "tensorwise"'),
    ("fp8-rowwise recording tensorwise", "fp8-rowwise", block_of(1, "fp8", recipe="tensorwise"),
     'runs[1].fp8.recipe is "tensorwise", not mode fp8-rowwise\'s "rowwise"'),
    ("a recipe of no mode", "fp8", block_of(1, "fp8", recipe="blockwise"),
     'runs[1].fp8.recipe is "blockwise", not a float8 recipe (tensorwise, rowwise)'),
    ("an fp8 block on fp32", "fp8", lambda d: d["runs"][0].update(fp8=copy.deepcopy(FP8_BLOCK)),
     "runs[0].fp8 is an object, but mode fp32 converts no layer to float8"),
    # the baseline the merge, the table and the plot compare with
    ("baseline 5", "why", config(baseline=5), "config.baseline is 5, not a precision mode (fp32, tf32,"),
    ('baseline ["fp32"]', "why", config(baseline=["fp32"]), "config.baseline is a list, not a precision mode"),
    ("baseline {}", "why", config(baseline={}), "config.baseline is an object, not a precision mode"),
    ("baseline fp64", "why", config(baseline="fp64"), 'config.baseline is "fp64", not a precision mode'),
    ("baseline null", "why", config(baseline=None), "config.baseline is null, not a precision mode"),
    # how gradients travelled, which the setup line prints
    ("grad_comm fp64 in config", "ranks", config(grad_comm="fp64"),
     'config.grad_comm is "fp64", not a value of --grad-comm (fp32, fp16, bf16)'),
    ("grad_comm fp64 in a run", "ranks", run_of(0, grad_comm="fp64"),
     'runs[0].grad_comm is "fp64", not a dtype gradients travel in (fp32, fp16, bf16)'),
    ("bucket_mb negative in config", "ranks", config(bucket_mb=-25.0),
     "config.bucket_mb is -25.0, not a positive number of MB up to 1048576 (1 TiB)"),
    ("bucket_mb negative in a run", "ranks", run_of(1, bucket_mb=-25.0),
     "runs[1].bucket_mb is -25.0, not a number above 0"),
    ("bucket_mb infinite in a run", "ranks",
     lambda d: d["runs"][1].update(bucket_mb=None, bucket_mb_nonfinite={"": "inf"}),
     "runs[1].bucket_mb is Infinity, not a finite number"),
    # the communication line of --explain on several ranks
    ("exposed all-reduce without the wall time", "ranks", profile_without_wall_ms,
     "runs[0].profile has no wall_ms beside its comm_exposed_ms"),
    ("more exposed all-reduce than the step", "ranks", block_of(0, "profile", comm_exposed_ms=1e6),
     "runs[0].profile.comm_exposed_ms is 1000000.0, more than its wall_ms"),
    # the census sentences and the memory table
    ("flushed share 1.5", "loss-scaling", numerics_of(2, "passes", "unscaled", flushed_share=1.5),
     "runs[2].numerics.passes.unscaled.flushed_share is 1.5, not a number of at most 1"),
    ("worst layer's share 2", "loss-scaling", numerics_of(2, "passes", "unscaled", worst_flushed_share=2),
     "runs[2].numerics.passes.unscaled.worst_flushed_share is 2, not a number of at most 1"),
    ("overflow share -0.5", "loss-scaling", numerics_of(2, "passes", "scaled", overflow_share=-0.5),
     "runs[2].numerics.passes.scaled.overflow_share is -0.5, not a number of at least 0"),
    ("relative error negative", "loss-scaling", numerics_of(3, "passes", "unscaled", relative_error=-1.0),
     "runs[3].numerics.passes.unscaled.relative_error is -1.0, not a number of at least 0"),
    ("a census of float8", "loss-scaling", numerics_of(2, dtype="float8"),
     'runs[2].numerics.dtype is "float8", not a dtype the census examines (float32, float16, bfloat16)'),
    ("no step sampled", "loss-scaling", numerics_of(2, sampled_steps=[]),
     "runs[2].numerics.sampled_steps is an empty list, not a list of at least one"),
    ("step 0 sampled", "loss-scaling", numerics_of(2, sampled_steps=[0]),
     "runs[2].numerics.sampled_steps[0] is 0, not a whole number of at least 1"),
    ("activation share of another value", "loss-scaling", numerics_of(2, "activation_max", share_of_fp16_max=1.5),
     "runs[2].numerics.activation_max.share_of_fp16_max is 1.5, not its value over 65504"),
    ("activation negative", "loss-scaling", numerics_of(2, "activation_max", value=-3.0, share_of_fp16_max=-3 / 65504),
     "runs[2].numerics.activation_max.value is -3.0, not a number of at least 0"),
    # the timings the table and the study divide by or order
    ("p90 below the median", "why", timings(0, p90=1.0),
     "runs[0].step_time_ms.median is"),
    ("p10 above the median", "why", timings(1, p10=1e6),
     "runs[1].step_time_ms.median is"),
    ("a step of 0 ms", "why", lambda d: d["runs"][0]["step_times_ms"].__setitem__(0, 0),
     "runs[0].step_times_ms[0] is 0, not a number above 0"),
    ("images/s infinite", "why",
     lambda d: d["runs"][0].update(images_per_sec=None, images_per_sec_nonfinite={"": "inf"}),
     "runs[0].images_per_sec is Infinity, not a finite number"),
    ("timed without images/s", "why", run_of(0, images_per_sec=None),
     "runs[0] has a step_time_ms but no images_per_sec"),
    ("run of 0 ranks", "why", run_of(0, world_size=0), "runs[0].world_size is 0, not a whole number of at least 1"),
    ("run of 0 steps", "why", run_of(0, steps=0), "runs[0].steps is 0, not a whole number of at least 1"),
    ("run of batch 0", "why", run_of(0, batch_size=0), "runs[0].batch_size is 0, not a whole number of at least 1"),
    ("repeat -1", "reading-the-numbers", run_of(2, repeat=-1),
     "runs[2].repeat is -1, not a whole number of at least 0"),
    # time to target, over seeds
    ("time to target without epochs", "target", run_of(0, epochs_to_target=None),
     "runs[0] has a time_to_target_s but no epochs_to_target"),
    ("epochs to target without time", "target", run_of(3, time_to_target_s=None),
     "runs[3] has an epochs_to_target but no time_to_target_s"),
    # the setup line and the merge
    ("batch 0", "why", config(batch_size=0), "config.batch_size is 0, not a positive integer up to 2147483647"),
    ("no batch size", "why", lambda d: d["config"].pop("batch_size"), "config.batch_size is missing"),
    ("steps null", "why", config(steps=None), "config.steps is null, not a positive integer up to 2147483647"),
    ("warm-up -1", "why", config(warmup=-1), "config.warmup is -1, not zero or a positive integer up to 2147483647"),
    ("stem null", "why", config(stem=None), "config.stem is null, not a value of --stem (cifar, imagenet)"),
    ("accumulation 0", "why", config(accum_steps=0),
     "config.accum_steps is 0, not a positive integer up to 2147483647"),
    ("lr negative", "why", config(lr=-0.1), "config.lr is -0.1, not a positive number up to 3.403e+38"),
    ("lr null", "why", config(lr=None), "config.lr is null, not a positive number up to 3.403e+38"),
    ("momentum negative", "why", config(momentum=-0.9),
     "config.momentum is -0.9, not zero or a positive number up to 3.403e+38"),
    ("label smoothing 1.5", "why", config(label_smoothing=1.5),
     "config.label_smoothing is 1.5, not at least 0 and below 1"),
    ("workers -1", "why", config(workers=-1), "config.workers is -1, not from 0 to 256"),
    ("fp8_emulate a word", "why", config(fp8_emulate="false"), 'config.fp8_emulate is "false", not true or false'),
    ("comparison a list", "why", lambda d: d.update(comparison=[1]), "comparison is a list, not an object"),
    ("a comparison row a number", "why", lambda d: d["comparison"].update(fp32=3),
     "comparison.fp32 is 3, not an object"),
]


@pytest.mark.parametrize("variant, edit, words", [case[1:] for case in FORGED], ids=[case[0] for case in FORGED])
def test_a_forged_sample_is_refused_with_one_sentence_naming_the_field(variant: str, edit: Callable[[Document], None],
                                                                      words: str, tmp_path: Path) -> None:
    (tmp_path / "genuine").mkdir()
    assert_read(variant, tmp_path / "genuine")  # unforged, the same document is read
    document = GENUINE[variant]()
    edit(document)
    path = tmp_path / "r.json"
    path.write_text(json.dumps(document))
    status, out, err = report(path, "--json", tmp_path / "m.json", "--csv", tmp_path / "m.csv")
    assert status == 2, out + err
    assert err.startswith(f"utils.report: error: {path}: ") and words in err, err
    assert err.count("\n") == 1 and "Traceback" not in err and out == "", err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["genuine", "r.json"], "nothing was written"
