"""Where does FP8 start to pay on this GPU? A few ViT encoder blocks at widths from 384 to 4096
(heads of 64, an MLP four times as wide), with the tokens and the batch fixed, trained in
amp-bf16, fp8 and fp8-rowwise by ampbench's own training step (utils.app.run_mode: the step
timer's CUDA events, the warm-up excluded, the median step). Per width it prints FP8's measured
speedup over amp-bf16 beside the roofline's prediction for this GPU
(utils/explain/fp8_predict.py), so the width at which FP8 pays is read off one table.

The blocks are torchvision's VisionTransformer with its attention swapped for nn.Linear
projections (models/attention.py), as every ViT ampbench builds: 32x32 images at patch 2 give
256 tokens and the class token. Only the matmul widths change along the sweep.

    python benchmarks/fp8_sweep.py -p                          # on an FP8 GPU (Ada, Hopper or newer)
    python benchmarks/fp8_sweep.py -p --widths 1024,4096 --json sweep.json
    python benchmarks/fp8_sweep.py --fp8-emulate --widths 64,128 -b 2 --steps 3   # CPU: checks the script

Emulated FP8 computes in software: its times check that the sweep runs, never FP8's speed; its
predictions are an H100 SXM's, labelled so (fp8_predict.run_prediction, as main.py's runs).
"""
from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any, Dict, List

from utils import console, modes, provenance  # no torch
from utils.config import RANGES, RunConfig, add_flag, flag_type, input_shape_of
from utils.fileio import ensure_writable
from utils.results.files import write_json

if TYPE_CHECKING:
    from utils.results.record import RunRecord

BASELINE = modes.BASELINES["fp8"]  # an fp8 mode's fair comparison: the same autocast without the float8 layers
FP8_MODES = [name for name, mode in modes.MODES.items() if mode.float8]
IMAGE_SIZE, PATCH_SIZE = 32, 2
TOKENS = (IMAGE_SIZE // PATCH_SIZE) ** 2 + 1  # 16x16 patches and the class token
HEAD_DIM = 64  # each width's heads: width / 64, as ViT-B and ViT-L have
# The widest blocks that train on one GPU: at 16384 the two hold 6.4 G parameters, 103 GB with
# AdamW's states, within an H200's 141 GB; at 32768, 412 GB.
MOST_WIDTH = 16384
LAYERS = 2
WIDTHS, BATCH, STEPS, WARMUP = [384, 768, 1024, 2048, 4096], 64, 20, 5  # the defaults; batch 64: M = 16,448
BLOCKS = "vit-blocks-"  # the blocks' name at a width, for the GPU suite's estimates: vit-blocks-384
# the ViT family's recipe (AdamW, no decay on the class token and position embedding) for the blocks
RECIPE_OF = "vit_s4"


def widths(text: str) -> List[int]:
    words = [word.strip() for word in text.split(",") if word.strip()]
    values = [int(word) for word in words if word.isascii() and word.isdigit() and len(word) <= len(str(MOST_WIDTH))]
    if not values or len(values) < len(words) or any(not HEAD_DIM <= value <= MOST_WIDTH or value % HEAD_DIM
                                                     for value in values):
        raise argparse.ArgumentTypeError(f"takes multiples of {HEAD_DIM} (the head size) up to {MOST_WIDTH}, like "
                                         f"384,768; got {console.shortened(text)}")
    return values


def encoder_blocks(width: int) -> Any:
    """LAYERS ViT blocks of `width` with nn.Linear projections, a patch embedding and a head."""
    from torchvision.models.vision_transformer import VisionTransformer

    from models.attention import swap_attention

    model = VisionTransformer(image_size=IMAGE_SIZE, patch_size=PATCH_SIZE, num_layers=LAYERS,
                              num_heads=width // HEAD_DIM, hidden_dim=width, mlp_dim=4 * width, num_classes=10)
    swap_attention(model)
    return model


def block_name(width: int) -> str:
    return f"{BLOCKS}{width}"


def step_flops(name: str, batch: int) -> int:
    """A training step's FLOPs of the blocks `name` (block_name's), counted on the meta device."""
    import torch

    from utils.measure import flops

    with torch.device("meta"):  # a width-4096 model is 400 M parameters: count it without allocating them
        model = encoder_blocks(int(name[len(BLOCKS):]))
    return flops.training_flops_per_step(model, batch, input_shape_of(IMAGE_SIZE))


def sweep(options: argparse.Namespace) -> Dict[str, Any]:
    names = [BASELINE] + FP8_MODES
    # main.py's rules for these flags, before torch is imported: fp8 on the CPU without --fp8-emulate
    config = RunConfig.build(model=RECIPE_OF, modes=",".join(names), steps=options.warmup + options.timed_steps,
                             warmup=options.warmup, batch_size=options.batch_size, gpu=options.gpu,
                             fp8_emulate=options.fp8_emulate, no_progress=True, no_eval=True)
    import torch

    from utils.app import run_mode
    from utils.data.dataset import synthetic
    from utils.explain import fp8_predict
    from utils.training import float8
    from utils.training.context import RunContext
    from utils.training.start import pick_device

    device = pick_device(options.gpu, cudnn_benchmark=True)
    for name in FP8_MODES:  # refuses a missing torchao, an old torch, a GPU without FP8
        float8.check_requirements(modes.MODES[name], device, options.fp8_emulate)
    plan = config.plan(False, 1)
    data = synthetic(device, seed=0)
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else None
    predicted_for, no_prediction = None, None
    print(f"{LAYERS} ViT blocks, {TOKENS} tokens, batch {options.batch_size}, {options.timed_steps} steps after "
          f"{options.warmup} warm-up; speedups over {BASELINE}, eager", header(), sep="\n")
    rows = []
    recipes = {name: recipe for name in FP8_MODES if (recipe := modes.MODES[name].float8)}
    for width in options.widths:
        torch.manual_seed(0)
        model = encoder_blocks(width)
        medians = {name: median_ms(run_mode(model, modes.MODES[name], data, config, plan, RunContext(device)).record)
                   for name in names}
        predicted = {}
        for name, recipe in recipes.items():  # eager, as the runs are
            prediction, no_prediction = fp8_predict.run_prediction(device_name, options.fp8_emulate, recipe, False,
                                                                   model, options.batch_size,
                                                                   input_shape_of(IMAGE_SIZE))
            predicted[name] = prediction and prediction["speedup"]
            predicted_for = prediction and prediction["for"]
        rows.append({"width": width, "heads": width // HEAD_DIM, "median_step_ms": medians,
                     "measured_speedup": {name: medians[BASELINE] / medians[name] for name in FP8_MODES},
                     "predicted_speedup": predicted})
        print(row_line(rows[-1]), flush=True)
    commit, _ = provenance.commit()
    return {"schema": "ampbench.fp8_sweep/2", "device": device_name or "cpu", "commit": commit,
            "source_sha256": provenance.source_digest(), "emulated": options.fp8_emulate,
            "predicted_for": predicted_for, "no_prediction": no_prediction, "compiled": False,
            "batch": options.batch_size, "image_size": IMAGE_SIZE, "patch_size": PATCH_SIZE, "tokens": TOKENS,
            "layers": LAYERS, "steps": options.timed_steps, "warmup": options.warmup, "baseline": BASELINE,
            "rows": rows}


def median_ms(record: RunRecord) -> float:
    """A run's median step in ms: each run here times --steps steps, at least one."""
    timing = record.step_time_ms
    assert timing is not None, "a sweep run timed no step"
    return timing["median"]


def header() -> str:
    return f"{'width':>5} {'heads':>5} {BASELINE + ' ms':>11}" + "".join(
        f" | {name + ' ms':>14} {'measured':>9} {'predicted':>9}" for name in FP8_MODES)


def row_line(row: Dict[str, Any]) -> str:
    line = f"{row['width']:5d} {row['heads']:5d} {row['median_step_ms'][BASELINE]:11.2f}"
    for name in FP8_MODES:
        predicted = row["predicted_speedup"][name]
        line += (f" | {row['median_step_ms'][name]:14.2f} {row['measured_speedup'][name]:8.2f}x "
                 f"{'-' if predicted is None else f'{predicted:.2f}x':>9}")
    return line


def build_parser() -> argparse.ArgumentParser:
    """The sweep's flags; the GPU suite reads its estimate of a sweep from them."""
    parser = console.Parser("fp8_sweep.py", prog="python benchmarks/fp8_sweep.py", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flag(parser, "gpu", help="train on CUDA (an FP8 GPU)")
    add_flag(parser, "fp8_emulate", help="FP8 in software, on any device: checks the sweep, never FP8's speed")
    parser.add_argument("--widths", type=widths, default=WIDTHS, help=f"model widths, multiples of {HEAD_DIM} "
                        f"(default {','.join(map(str, WIDTHS))})")
    add_flag(parser, "batch_size", default=BATCH,
             help=f"images per step (default {BATCH}: {BATCH * TOKENS:,} tokens, the M of every matmul)")
    # timed steps, after the warm-up: not main.py's --steps/-n, which counts the warm-up too
    parser.add_argument("--steps", dest="timed_steps", type=flag_type(RANGES["steps"]), default=STEPS,
                        help=f"timed steps per mode (default {STEPS})")
    add_flag(parser, "warmup", default=WARMUP, help=f"untimed steps before them (default {WARMUP})")
    add_flag(parser, "json", help="write the sweep as JSON")
    return parser


def main() -> int:
    options = build_parser().parse_args()

    if options.json:  # before minutes of GPU time, not after
        ensure_writable(options.json, "--json")
    document = sweep(options)
    if document["emulated"]:
        print("FP8 emulated in software: the measured speedups are not FP8's.")
    print(f"predicted for {document['predicted_for']}" if document["predicted_for"] else
          f"no prediction: {document['no_prediction']}")
    if options.json:
        write_json(options.json, document)
    return 0


if __name__ == "__main__":
    sys.exit(console.run("fp8_sweep.py", main))
