"""FP8's speedup over bfloat16 predicted before it runs: a roofline of one Linear's forward and
backward (three GEMMs) plus the float8 casts its recipe adds, and of a whole training step by
Amdahl's law (the converted layers predicted, the rest of the step unchanged).

The model is torchao's (pytorch/ao, torchao/testing/training/roofline_utils.py, used by
benchmarks/float8/float8_roofline.py): a GEMM takes the longer of its FLOPs at 78% of the dense
peak and its operands' bytes at 92% of the memory bandwidth; each cast is a kernel whose bytes
read and written are listed per recipe and tensor role. Two figures torchao's roofline leaves
out are fitted to torchao's own measured table (docs/static/fp8-rowwise-perf.png, rowwise,
compiled, an H100): the casts reach 35% of the bandwidth, not 92%, and each cast kernel costs
10 microseconds besides its bytes. Without them the roofline calls FP8 faster than bfloat16 for
shapes torchao measured at half bfloat16's speed.

python -m utils.explain.fp8_predict --gpu h100-sxm --recipe rowwise --compiled --shape 16384,4096,8192
"""
from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from models.families import DEFAULT_IMAGE_SIZE, DEFAULT_NUM_CLASSES, IMAGE_SIZES
from utils import console
from utils.config import InputShape, input_shape_of
from utils.errors import UserError
from utils.measure.gpus import DEVICE_NAMES, SPECS, GpuSpec

if TYPE_CHECKING:
    from torch import nn

    from utils.config import DataSettings, Precision, Speed, Training

GEMM_SHARE = 0.78  # of the dense peak a large GEMM reaches: torchao's pct_achievable_gemm_tops (H100)
BANDWIDTH_SHARE = 0.92  # of the bandwidth a large elementwise kernel reaches: torchao's pct_achievable_mem_bw
CAST_BANDWIDTH_SHARE = 0.35  # of the bandwidth torchao's measured casts reach (fitted to its table)
CAST_KERNEL_S = 10e-6  # each cast kernel's cost besides its bytes (fitted to its table)
BF16, FP8 = 2, 1  # bytes per element
# An activation between layers, in bfloat16: its producer writes it, its consumer reads it, the
# backward reads it again with the output's gradient and writes the input's: 5 passes of 2 bytes.
ACTIVATION_BYTES = 5 * BF16
# An fp32 parameter's update: weight, gradient and momentum read, weight and momentum written.
PARAMETER_BYTES = 5 * 4
RECIPES = ("tensorwise", "rowwise")
EMULATED_GPU = "h100-sxm"  # an emulated or CPU run predicts for the GPU people borrow for FP8
FP8_GPUS = tuple(key for key, spec in SPECS.items() if "fp8" in spec.tflops)
LARGEST_DIMENSION = 2 ** 31 - 1  # cuBLAS takes a GEMM's M, K and N as 32-bit integers


class LinearPrediction(NamedTuple):
    """One Linear's forward and backward (three GEMMs) in bfloat16 and in FP8, in seconds."""
    gpu: str
    recipe: str
    compiled: bool
    m: int
    k: int
    n: int
    bf16_s: float
    fp8_s: float
    speedup: float
    bf16_gemm_s: float
    fp8_gemm_s: float
    overhead_s: float  # the recipe's casts, amax and scale passes
    overhead_kernels: int


class StepPrediction(NamedTuple):
    """A training step in amp-bf16 and in FP8: the converted layers' time and the rest's, seconds."""
    gpu: str
    recipe: str
    compiled: bool
    converted_layers: int
    linear_bf16_s: float
    linear_fp8_s: float
    rest_s: float
    bf16_s: float
    fp8_s: float
    speedup: float
    linear_speedup: float


def spec_of(gpu: str) -> GpuSpec:
    """The spec of a GPU key that has FP8 tensor cores; a user error for any other."""
    if gpu not in FP8_GPUS:
        raise UserError(f"no FP8 figures for GPU '{gpu}': pick one of {', '.join(FP8_GPUS)}.")
    return SPECS[gpu]


def memory_s(spec: GpuSpec, nbytes: float, share: float = BANDWIDTH_SHARE) -> float:
    return nbytes / (spec.memory_tb_s * 1e12 * share)


def gemm_s(spec: GpuSpec, arithmetic: str, operand_bytes: int, m: int, k: int, n: int) -> float:
    """An M x K by K x N GEMM: its FLOPs at GEMM_SHARE of the peak or its bytes (operands in
    `operand_bytes`, a bfloat16 output), whichever takes longer."""
    compute = 2 * m * k * n / (spec.tflops[arithmetic] * 1e12 * GEMM_SHARE)
    return max(compute, memory_s(spec, operand_bytes * (m * k + k * n) + BF16 * m * n))


def three_gemms_s(spec: GpuSpec, arithmetic: str, operand_bytes: int, m: int, k: int, n: int) -> float:
    """Forward (M,K,N), the input's gradient (M,N,K) and the weight's gradient (K,M,N)."""
    return sum(gemm_s(spec, arithmetic, operand_bytes, *shape) for shape in ((m, k, n), (m, n, k), (k, m, n)))


def cast_kernels(recipe: str, elements: int, weight: bool, fused: bool) -> List[int]:
    """Bytes read and written by each kernel that casts one tensor (input, weight or output
    gradient) to float8 for the forward and backward, after torchao's
    get_tensor_memory_traffic_ovhd_s. `fused`: its first read happens in its producer's kernel."""
    first_read = 0 if fused else BF16 * elements
    if recipe == "tensorwise":
        # amax (a read and a tiny second stage), then the cast, writing both layouts
        if weight:  # the forward's and the backward's casts run apart
            return [BF16 * elements, 0, (BF16 + FP8) * elements, (BF16 + FP8) * elements]
        return [first_read, 0, (BF16 + 2 * FP8) * elements]
    if weight:  # row-major cast; transpose in bfloat16; the transposed cast
        return [(BF16 + FP8) * elements, 2 * BF16 * elements, (BF16 + FP8) * elements]
    # row-major cast and a transposed bfloat16 copy; the transposed cast
    return [first_read + (FP8 + BF16) * elements, (BF16 + FP8) * elements]


def predict_linear(gpu: str, recipe: str, compiled: bool, m: int, k: int, n: int) -> LinearPrediction:
    """One Linear (input M x K, weight K x N) forward and backward in bfloat16 and in FP8 with
    `recipe`'s casts. Compiled, the output gradient's first cast read fuses into the kernel that
    produced it (torchao's fuse_with_prev); the input's does not (torchao's measurements on a
    LayerNorm -> Linear fit only so). Eager, every cast reads its tensor itself."""
    spec = spec_of(gpu)
    if recipe not in RECIPES:
        raise UserError(f"no recipe '{recipe}': pick one of {', '.join(RECIPES)}.")
    if not 1 <= min(m, k, n) <= max(m, k, n) <= LARGEST_DIMENSION:
        raise UserError(f"a Linear's M, K and N are each from 1 to {LARGEST_DIMENSION} (cuBLAS takes them as 32-bit "
                        f"integers), not {m},{k},{n}: give a --shape within it (with -m, -b sets M).")
    kernels = (cast_kernels(recipe, m * k, weight=False, fused=False) + cast_kernels(recipe, k * n, True, False)
               + cast_kernels(recipe, m * n, weight=False, fused=compiled))
    overhead = sum(memory_s(spec, nbytes, CAST_BANDWIDTH_SHARE) + CAST_KERNEL_S for nbytes in kernels)
    bf16 = three_gemms_s(spec, "bf16", BF16, m, k, n)
    fp8 = three_gemms_s(spec, "fp8", FP8, m, k, n)
    total = fp8 + overhead
    return LinearPrediction(gpu, recipe, compiled, m, k, n, bf16, total, bf16 / total, bf16, fp8, overhead,
                            len(kernels))


def predict_step(gpu: str, recipe: str, compiled: bool, shapes: Sequence[Tuple[int, int, int]],
                 rest_s: float) -> StepPrediction:
    """A step whose converted Linear layers have forward shapes `shapes` (M, K, N; one per layer)
    and whose other work takes `rest_s` seconds in either mode: Amdahl's law."""
    layers = [predict_linear(gpu, recipe, compiled, *shape) for shape in shapes]
    linear_bf16 = sum(layer.bf16_s for layer in layers)
    linear_fp8 = sum(layer.fp8_s for layer in layers)
    bf16, fp8 = linear_bf16 + rest_s, linear_fp8 + rest_s
    return StepPrediction(gpu, recipe, compiled, len(layers), linear_bf16, linear_fp8, rest_s, bf16, fp8,
                          bf16 / fp8 if fp8 > 0 else 1.0, linear_bf16 / linear_fp8 if layers else 1.0)


def predict_model(gpu: str, recipe: str, compiled: bool, model: nn.Module, batch_size: int,
                  input_shape: InputShape) -> StepPrediction:
    """A training step of `model` (batches of `batch_size` images of `input_shape`): the Linear
    layers torchao converts (utils/training/float8.py's rules) predicted by predict_linear at the
    shapes torch's FLOP counter sees, and the rest of the step in bfloat16 on the same roofline:
    its other FLOPs (convolutions, attention, the head) at GEMM_SHARE of the bf16 peak, plus its
    memory traffic, ACTIVATION_BYTES per element of every other layer's output and
    PARAMETER_BYTES per parameter, at BANDWIDTH_SHARE of the bandwidth."""
    from utils.measure import flops
    from utils.training import float8

    spec = spec_of(gpu)
    check_flop_counter()
    count = flops.count_step(model, batch_size, input_shape)
    converted = float8.converted_layers(model, count.linears)
    other_flops = count.total - sum(count.linears[name][0] for name in converted)
    elements = sum(written for name, written in count.outputs.items() if name not in converted)
    parameters = sum(parameter.numel() for parameter in model.parameters())
    rest = other_flops / (spec.tflops["bf16"] * 1e12 * GEMM_SHARE) + memory_s(
        spec, ACTIVATION_BYTES * elements + PARAMETER_BYTES * parameters)
    return predict_step(gpu, recipe, compiled, [count.linears[name][1] for name in converted], rest)


def check_flop_counter() -> None:
    from utils import compat

    if not compat.has_flop_counter():
        raise UserError("predicting a model's step needs torch 2.1 or newer (torch.utils.flop_counter finds its "
                        "matmul shapes); --shape M,K,N works on any torch.")


def fp8_blocks(precision: Precision, training: Training, data: DataSettings, speed: Speed, model: nn.Module,
               per_step: int, device_name: Optional[str]) -> Tuple[Dict[str, Dict[str, Any]], Optional[str]]:
    """({fp8 mode: runs[].fp8, its accounting (utils/training/float8.py) with its FLOPs for the
    whole job's step, `per_step` processes' micro-batches, and its recipe's roofline prediction
    for the run's GPU, `device_name`, or an H100 SXM when emulated}; the note a low FP8 share
    calls for, said once before training, or None). Empty when no fp8 mode runs."""
    from utils.training import float8

    fp8_modes = [mode for mode in precision.modes if mode.float8]
    if not fp8_modes:
        return {}, None
    emulated = precision.fp8_emulate
    block = float8.accounting(model, training.batch_size, training.model, data.input_shape)
    block["fp8_flops_per_step"] *= per_step
    block["emulated"] = emulated
    blocks = {}
    for mode in fp8_modes:
        assert mode.float8 is not None  # fp8_modes holds the modes with a float8 recipe
        prediction, why = run_prediction(device_name, emulated, mode.float8, speed.compile, model,
                                         training.batch_size, data.input_shape)
        blocks[mode.name] = dict(block, prediction=prediction, prediction_note=why)
    return blocks, float8.low_share_note(block, fp8_modes[0].name)


def run_prediction(device_name: Optional[str], emulated: bool, recipe: str, compiled: bool, model: nn.Module,
                   batch_size: int, input_shape: InputShape) -> Tuple[Optional[Dict[str, Any]], Optional[str]]:
    """(runs[].fp8.prediction, why it is null): for the run's GPU by its device name, or for an
    H100 SXM when FP8 is emulated; None with why for a GPU without FP8 figures in the table."""
    if emulated or device_name is None:
        gpu, called = EMULATED_GPU, f"emulated: {SPECS[EMULATED_GPU].called}"
    else:
        known = DEVICE_NAMES.get(device_name)
        if known not in FP8_GPUS:
            return None, f"no FP8 figures for '{device_name}' in utils/measure/gpus.py"
        gpu = known
        called = f"this GPU: {SPECS[gpu].called}"
    step = predict_model(gpu, recipe, compiled, model, batch_size, input_shape)
    return {"gpu": gpu, "for": called, "compiled": compiled, "speedup": step.speedup,
            "linear_speedup": step.linear_speedup, "bf16_ms": 1000 * step.bf16_s, "fp8_ms": 1000 * step.fp8_s}, None


def pays_from(gpu: str, recipe: str, compiled: bool, m: int) -> Optional[int]:
    """The smallest power-of-two width K = N (up to 32768) at which one Linear with M rows runs
    faster in FP8, or None."""
    width = 256
    while width <= 32768:
        if predict_linear(gpu, recipe, compiled, m, width, width).speedup > 1.0:
            return width
        width *= 2
    return None


def explained(prediction: Any) -> List[str]:
    """A few lines that say where a prediction comes from."""
    mode = "compiled" if prediction.compiled else "eager"
    if isinstance(prediction, LinearPrediction):
        return [f"one Linear, M={prediction.m} K={prediction.k} N={prediction.n}, forward and backward (3 GEMMs):",
                f"  bf16 GEMMs {1e6 * prediction.bf16_gemm_s:.1f} us; fp8 GEMMs {1e6 * prediction.fp8_gemm_s:.1f} us",
                f"  fp8 casts, amax and scales ({mode}): {prediction.overhead_kernels} kernels, "
                f"{1e6 * prediction.overhead_s:.1f} us",
                f"  predicted speedup of fp8 over bf16: {prediction.speedup:.2f}x"]
    return [f"a training step, {prediction.converted_layers} Linear layers in FP8 ({prediction.recipe}, {mode}) on "
            f"{SPECS[prediction.gpu].called}:",
            f"  converted layers: bf16 {1e3 * prediction.linear_bf16_s:.3f} ms, "
            f"fp8 {1e3 * prediction.linear_fp8_s:.3f} ms ({prediction.linear_speedup:.2f}x)",
            f"  the rest of the step, the same in both: {1e3 * prediction.rest_s:.3f} ms",
            f"  predicted speedup of the step: {prediction.speedup:.2f}x"]


def whole_number(text: str) -> Optional[int]:
    """The whole number `text` spells in digits 0 to 9 (no sign, no other script's digits, no
    more digits than int() reads), or None."""
    text = text.strip()
    if not (text.isascii() and text.isdigit()):
        return None
    try:
        return int(text)
    except ValueError:  # more than int()'s 4300 digits
        return None


def parse_shape(text: str) -> Tuple[int, int, int]:
    parts = text.split(",")
    numbers = [number for number in map(whole_number, parts) if number is not None]
    if len(parts) != 3 or len(numbers) != 3:
        raise UserError(f"--shape takes M,K,N as three whole numbers from 1 to {LARGEST_DIMENSION} in digits 0 to 9, "
                        f"like 16384,4096,8192; not '{console.shortened(text)}'.")
    m, k, n = numbers
    return m, k, n


def whole(low: int, high: int) -> Callable[[str], int]:
    """argparse's type for a whole number from `low` to `high`, in digits 0 to 9."""
    def parse(text: str) -> int:
        number = whole_number(text)
        if number is None or not low <= number <= high:
            raise argparse.ArgumentTypeError(f"must be a whole number from {low} to {high}, "
                                             f"not '{console.shortened(text)}'")
        return number

    return parse


def build_parser() -> console.Parser:
    parser = console.Parser("fp8_predict", prog="python -m utils.explain.fp8_predict",
                            description="Predict FP8's speedup over bfloat16 on a GPU from a roofline.")
    parser.add_argument("--gpu", default=EMULATED_GPU, choices=FP8_GPUS, help="the GPU (default %(default)s)")
    parser.add_argument("--recipe", default="tensorwise", choices=RECIPES, help="torchao's float8 scaling")
    parser.add_argument("--compiled", action="store_true", help="with torch.compile (else eager)")
    parser.add_argument("--shape", metavar="M,K,N", help="one Linear: M rows of K inputs to N outputs")
    parser.add_argument("-m", "--model", help="a whole training step of this model")
    parser.add_argument("--model-factory", metavar="MODULE:FUNCTION",
                        help="a whole training step of your own model, as main.py's --model-factory builds it")
    parser.add_argument("--num-classes", type=whole(2, LARGEST_DIMENSION), default=DEFAULT_NUM_CLASSES,
                        help="the classes --model-factory's model outputs (default %(default)s)")
    parser.add_argument("-b", "--batch-size", type=whole(1, LARGEST_DIMENSION), default=128,
                        help="its batch (default %(default)s)")
    parser.add_argument("--image-size", type=whole(*IMAGE_SIZES), default=DEFAULT_IMAGE_SIZE,
                        help="its image size, as main.py's --image-size (default %(default)s)")
    parser.add_argument("--json", action="store_true", help="print the prediction as JSON")
    return parser


def predict(options: Dict[str, Any]) -> Any:
    """The prediction the parsed command line asks for; torch is imported only for a model. A
    torchvision model is built weightless (models/factory.py): its shapes are all the roofline
    reads, so any model at any size it takes answers at once. Your own (--model-factory) is built
    as main.py builds it, whole, as its check may need to run it; its step is counted on the meta
    device, or refused with why."""
    asked = [given for given in ("shape", "model", "model_factory") if options[given] is not None]
    if len(asked) != 1:
        raise UserError("give one of --shape M,K,N, -m MODEL or --model-factory MODULE:FUNCTION.")
    gpu, recipe, compiled = options["gpu"], options["recipe"], options["compiled"]
    if options["shape"] is not None:
        return predict_linear(gpu, recipe, compiled, *parse_shape(options["shape"]))
    check_flop_counter()  # torch 2.1, as factory.weightless
    from models import factory, raised, user

    shape, batch = input_shape_of(options["image_size"]), options["batch_size"]
    if options["model"] is not None:
        with factory.weightless():
            model = factory.build_model(options["model"], batch_size=batch, image_size=options["image_size"])
        return predict_model(gpu, recipe, compiled, model, batch, shape)
    spec = options["model_factory"]
    model = user.build_user_model(spec, options["num_classes"], options["image_size"], batch_size=batch)
    try:
        return predict_model(gpu, recipe, compiled, model, batch, shape)
    except Exception as error:  # the user's forward, raising anything on the meta device
        raise UserError(f"--model-factory {spec}: its step cannot be counted on the meta device, where the roofline "
                        f"reads its shapes ({raised.described(error)}).") from None


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Print the prediction (--json: as strict JSON); a bad input exits 2 with one sentence."""
    options = vars(build_parser().parse_args(argv))
    try:
        prediction = predict(options)
    except UserError as error:
        return console.refused("fp8_predict", error)
    if options["json"]:
        print(json.dumps(prediction._asdict(), allow_nan=False, sort_keys=True))
    else:
        print("\n".join(explained(prediction)))
    return 0


command = console.program("fp8_predict", main)  # the installed `ampbench-fp8-predict`

if __name__ == "__main__":
    raise SystemExit(command())
