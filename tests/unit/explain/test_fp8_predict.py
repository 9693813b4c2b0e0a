"""The FP8 roofline prediction: against torchao's measured table, its shape in M, K and N,
Amdahl's law for a step, every GPU in the spec table, and its command line."""
import json
import math
import subprocess
import sys

import pytest

from conftest import ROOT
from models import factory
from utils.errors import UserError
from utils.explain import fp8_predict
from utils.explain.fp8_predict import FP8_GPUS, predict_linear, predict_model, predict_step
from utils.measure import gpus

# torchao's published table (see the file's header): {(M, K, N): measured speedup}
TABLE = ROOT / "tests" / "unit" / "explain" / "data" / "torchao-fp8-rowwise-h100.txt"
SIZES = (1024, 2048, 4096, 8192, 16384, 32768)
PUBLISHED = {(int(row[0]), int(row[1]), n): float(value)
             for row in (line.split() for line in TABLE.read_text().splitlines() if not line.startswith("#"))
             for n, value in zip(SIZES, row[2:])}


def torchao_experiment(m, k, n):
    """torchao's measured step: the Linear, and a LayerNorm over its input and a sigmoid over its
    output in bfloat16 in both (ACTIVATION_BYTES per element, at the roofline's bandwidth)."""
    spec = gpus.SPECS["h100-sxm"]
    rest = fp8_predict.memory_s(spec, fp8_predict.ACTIVATION_BYTES * (m * k + m * n))
    return predict_step("h100-sxm", "rowwise", True, [(m, k, n)], rest).speedup


def test_the_published_table_is_read_whole():
    assert len(PUBLISHED) == 216
    assert PUBLISHED[(1024, 1024, 1024)] == 0.42 and PUBLISHED[(16384, 32768, 32768)] == 1.72
    assert PUBLISHED[(32768, 32768, 32768)] == 1.52


def test_the_prediction_is_on_the_published_side_of_one_and_near_most_cells():
    wrong_side = [cell for cell, measured in PUBLISHED.items()
                  if (measured <= 0.85 and torchao_experiment(*cell) >= 1.0)
                  or (measured >= 1.15 and torchao_experiment(*cell) <= 1.0)]
    far = [cell for cell, measured in PUBLISHED.items() if abs(torchao_experiment(*cell) - measured) > 0.15]
    assert wrong_side == []
    assert len(far) <= 15, far  # docs/transformers-and-fp8.md names them and says why


@pytest.mark.parametrize("cell, measured", [((1024, 8192, 1024), 0.45), ((2048, 4096, 8192), 0.78),
                                            ((4096, 4096, 8192), 1.01), ((8192, 8192, 8192), 1.20),
                                            ((16384, 8192, 16384), 1.39), ((32768, 16384, 16384), 1.49)])
def test_a_handful_of_published_cells(cell, measured):
    """Cells of the image, typed apart from the table above so that a misread row shows."""
    assert PUBLISHED[cell] == measured
    predicted = torchao_experiment(*cell)
    assert predicted == pytest.approx(measured, abs=0.15)
    assert 0.85 < measured < 1.15 or (predicted > 1.0) == (measured > 1.0)


@pytest.mark.parametrize("recipe", ["tensorwise", "rowwise"])
@pytest.mark.parametrize("compiled", [False, True])
def test_the_speedup_grows_with_each_dimension(recipe, compiled):
    """More work per byte cast: every GEMM is compute-bound at these sizes, so each of M, K and N
    raises the FLOPs FP8 halves faster than the bytes its casts move."""
    for fixed in ((4096, 4096), (1024, 8192)):
        for axis in range(3):
            speedups = []
            for size in SIZES:
                shape = list(fixed)
                shape.insert(axis, size)
                speedups.append(predict_linear("h100-sxm", recipe, compiled, *shape).speedup)
            assert speedups == sorted(speedups), (axis, fixed, speedups)


def test_compiled_beats_eager_and_rowwise_costs_more_than_tensorwise():
    shape = (8192, 4096, 4096)
    assert predict_linear("h100-sxm", "rowwise", True, *shape).speedup > \
        predict_linear("h100-sxm", "rowwise", False, *shape).speedup
    assert predict_linear("h100-sxm", "tensorwise", True, *shape).speedup > \
        predict_linear("h100-sxm", "rowwise", True, *shape).speedup


def test_a_step_obeys_amdahl():
    shapes = [(8192, 8192, 8192), (8192, 8192, 32768)]
    alone = predict_step("h100-sxm", "rowwise", True, shapes, 0.0)
    diluted = predict_step("h100-sxm", "rowwise", True, shapes, 0.05)
    assert alone.speedup == pytest.approx(alone.linear_speedup) and alone.speedup > 1.0
    assert 1.0 < diluted.speedup < alone.speedup
    assert predict_step("h100-sxm", "rowwise", True, [], 0.05).speedup == 1.0
    slow = predict_step("h100-sxm", "rowwise", True, [(256, 192, 192)], 0.001)
    assert slow.linear_speedup < slow.speedup < 1.0  # the rest dilutes a slowdown too


@pytest.mark.parametrize("gpu", FP8_GPUS)
def test_every_gpu_with_fp8_in_the_table_predicts(gpu):
    for recipe in fp8_predict.RECIPES:
        prediction = predict_linear(gpu, recipe, True, 16384, 4096, 8192)
        assert math.isfinite(prediction.speedup) and prediction.speedup > 0
    assert set(FP8_GPUS) >= {"h100-sxm", "h100-pcie", "h200", "l40s", "b200"}


def test_a_gpu_without_fp8_or_a_bad_shape_is_refused():
    with pytest.raises(UserError, match="no FP8 figures for GPU 'a100-40gb'"):
        predict_linear("a100-40gb", "rowwise", True, 1024, 1024, 1024)
    for shape in ((0, 1024, 1024), (1024, 2 ** 31, 1024)):
        with pytest.raises(UserError, match="M, K and N are each from 1 to 2147483647"):
            predict_linear("h100-sxm", "rowwise", True, *shape)


def test_a_model_step_predicts_its_converted_layers_and_the_rest():
    model = factory.build_model("vit_t4", batch_size=64, image_size=32)
    step = predict_model("h100-sxm", "rowwise", True, model, 64, (3, 32, 32))
    assert step.converted_layers > 0 and step.rest_s > 0
    assert step.linear_speedup < step.speedup < 1.0  # a CIFAR ViT sits in FP8's slow corner
    bigger = predict_model("h100-sxm", "rowwise", True, model, 512, (3, 32, 32))
    assert bigger.linear_speedup > step.linear_speedup


def test_every_device_name_maps_to_a_spec_and_mfu_reads_the_same_peaks():
    from utils.measure import flops
    from utils.modes import MODES
    assert all(key in gpus.SPECS for key in gpus.DEVICE_NAMES.values())
    assert flops.peak_tflops("NVIDIA H200", MODES["amp-bf16"]) == (gpus.SPECS["h200"].tflops["bf16"], None)
    assert gpus.SPECS["h200"].memory_tb_s > gpus.SPECS["h100-sxm"].memory_tb_s


def cli(*args):
    return subprocess.run([sys.executable, "-m", "utils.explain.fp8_predict", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_the_command_line_prints_json_and_explains():
    shape = ["--gpu", "h100-sxm", "--recipe", "rowwise", "--compiled", "--shape", "16384,4096,8192"]
    result = cli(*shape, "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout, parse_constant=lambda constant: pytest.fail(constant))
    assert document["speedup"] == pytest.approx(predict_linear("h100-sxm", "rowwise", True, 16384, 4096, 8192).speedup)
    plain = cli(*shape)
    assert "bf16 GEMMs" in plain.stdout and "7 kernels" in plain.stdout and "1.17x" in plain.stdout
    model = cli("-m", "vit_t4", "-b", "32", "--json")
    assert model.returncode == 0, model.stderr
    assert json.loads(model.stdout)["speedup"] < 1.0 and json.loads(model.stdout)["converted_layers"] > 0


@pytest.mark.parametrize("args, said", [
    (["--shape", "1024,1024"], "--shape takes M,K,N as three whole numbers from 1 to 2147483647"),
    (["--shape", "1\u00b2,2,3"], "in digits 0 to 9, like"),  # a superscript two: isdigit(), not int()
    (["--shape", "1,2," + "9" * 5000], "in digits 0 to 9, like"),  # beyond int()'s 4300 digits
    (["--shape", "1,2,2147483648"], "M, K and N are each from 1 to 2147483647"),
    (["--shape", "1,2,3", "-m", "vit_t4"], "give one of --shape M,K,N, -m MODEL or --model-factory"),
    (["--gpu", "a100-40gb", "--shape", "1,2,3"], "invalid choice"),
    (["-m", "vit_t4", "-b", "0"], "argument -b/--batch-size: must be a whole number from 1 to 2147483647"),
    (["-m", "vit_t4", "--image-size", "\u0661\u0662\u0668"], "must be a whole number from 16 to 1024"),
    (["-m", "vit_t4", "--image-size", "1024"], "this run's are 1024x1024: run it with --image-size 256."),
    (["-m", "no_such_model"], "no_such_model"),
])
def test_bad_input_exits_2_with_one_sentence(args, said):
    result = cli(*args)
    assert result.returncode == 2 and said in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and result.stderr.startswith("fp8_predict: error: ")


def test_a_model_is_predicted_weightless_at_the_largest_size_it_takes():
    """The roofline reads shapes alone: the model is built with its weights on the meta device
    and checked there, so no model at any size it takes costs memory or minutes."""
    predicted = fp8_predict.predict(vars(fp8_predict.build_parser().parse_args(["-m", "vit_t4", "--image-size",
                                                                                "256"])))
    assert predicted.converted_layers == 48 and 0 < predicted.speedup
    with factory.weightless():
        model = factory.build_model("vit_h_14", image_size=896, batch_size=2)
    assert {parameter.device.type for parameter in model.parameters()} == {"meta"}


def test_a_prediction_that_cannot_be_printed_is_one_sentence_and_exit_1():
    with open("/dev/full", "w") as full:  # Linux's device that is always full
        result = subprocess.run([sys.executable, "-m", "utils.explain.fp8_predict", "--shape", "1,2,3", "--json"],
                                cwd=ROOT, stdout=full, stderr=subprocess.PIPE, text=True, timeout=60)
    assert result.returncode == 1 and result.stderr == (
        "fp8_predict: error: could not write the standard output (No space left on device), so what it printed "
        "there is cut short.\n")


def test_a_run_predicts_for_its_gpu_an_h100_when_emulated_and_none_for_a_card_without_figures():
    model = factory.build_model("vit_t4", batch_size=8, image_size=32)
    on_gpu, why = fp8_predict.run_prediction("NVIDIA H100 80GB HBM3", False, "rowwise", True, model, 8, (3, 32, 32))
    assert why is None and (on_gpu["gpu"], on_gpu["for"], on_gpu["compiled"]) == ("h100-sxm", "this GPU: an H100 SXM",
                                                                                  True)
    emulated, _ = fp8_predict.run_prediction("NVIDIA A100-SXM4-80GB", True, "rowwise", False, model, 8, (3, 32, 32))
    assert (emulated["gpu"], emulated["for"]) == ("h100-sxm", "emulated: an H100 SXM")
    assert json.loads(json.dumps(emulated, allow_nan=False)) == emulated
    assert fp8_predict.run_prediction("NVIDIA A100-SXM4-80GB", False, "rowwise", True, model, 8, (3, 32, 32)) == (
        None, "no FP8 figures for 'NVIDIA A100-SXM4-80GB' in utils/measure/gpus.py")


def test_your_own_model_is_predicted_as_main_py_builds_it():
    """--model-factory: the model of tests/cli/user_models.py, built whole and counted on the meta
    device; one the meta device cannot run is refused with why."""
    options = vars(fp8_predict.build_parser().parse_args(["--model-factory", "tests.cli.user_models:mlp",
                                                          "--image-size", "16", "-b", "32", "--num-classes", "3"]))
    predicted = fp8_predict.predict(options)
    assert predicted.converted_layers == 2 and predicted.speedup > 0
    with pytest.raises(UserError, match="its step cannot be counted on the meta device"):
        fp8_predict.predict(dict(options, model_factory="tests.cli.user_models:CpuPositions"))
