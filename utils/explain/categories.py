"""Which category each profiled op belongs to: the one table README's "Why is it (not)
faster?" documents.

An op's own (self) time goes to one category, decided along its chain of enclosing ops:
1. a stage, the innermost one around it: the input pipeline, the loss, the optimizer, the
   loss scaler, gradient communication (a cast inside the loss is the loss's cost);
2. else float8 work, then a dtype conversion, the innermost one: autocast's casts run inside
   the op they feed (aten::conv2d -> aten::_to_copy), and their time is the casts', not the
   convolution's; a cast inside torchao's cast to float8 is float8 work, and so are the amax
   and scale ops (abs, max, reciprocal) inside an op that names float8, and only there: a
   model's own abs or max is not;
3. else the outermost op with a kind: aten::conv2d's helpers (aten::empty, ...) are the
   convolution's time;
4. else "other", which the top-ops list names (Python between ops is "(Python, between ops)").
"""
from __future__ import annotations

import re
from typing import Optional, Sequence

# (category, what it holds, pattern) in README's order; a pattern is matched in full against an
# op's core name: lower case, without its namespace ("aten::"), the autograd engine's
# "evaluate_function: " prefix, a "Backward<N>" suffix or leading underscores.
CATEGORIES = [
    ("conv", "convolutions, forward and backward",
     r".*conv.*"),
    ("matmul", "matrix products: linear layers, attention",
     r"(add|b|badd|scaled_)?mm|matmul|linear|t|.*gemm.*|.*scaled_dot_product.*|.*attention.*|einsum"),
    ("norm", "batch, layer, group and instance normalisation, forward and backward",
     r".*(batch_?norm|layer_?norm|group_?norm|instance_?norm|rms_?norm).*"),
    ("elementwise", "activations, adds, pooling and the other memory-bound ops",
     r"(relu|relu_|threshold.*|hardtanh.*|clamp.*|sigmoid.*|silu.*|gelu.*|hardswish.*|hardsigmoid.*|tanh.*"
     r"|elu.*|leaky_relu.*|add|add_|sub|sub_|rsub|mul|mul_|div|div_|neg|exp|log|pow|sqrt|rsqrt|.*pool.*|mean"
     r"|sum|cat|stack|clone|copy_|fill_|zero_|zeros|ones|ones_like|zeros_like|full|.*dropout.*|bernoulli_?"
     r"|native_dropout.*|where|masked_fill_?|softmax|accumulategrad|lerp_?|addcmul_?|addcdiv_?|flip|index"
     r"|gather|constant_pad_nd|pad|.*interpolate.*|upsample.*)"),
    ("float8", "the fp8 modes' float8 work: casts to float8, their scales and the amax (abs, max) they need",
     r"tofloat8.*|.*to_float8.*|.*float8_?cast.*"),
    ("cast", "dtype conversions, such as the ones autocast inserts",
     r"to|to_copy|tocopy|type_as|autocast_to_.*|.*cast.*"),
    ("loss", "the loss: cross-entropy, log-softmax, NLL, forward and backward",
     r".*(cross_entropy|nll_?loss|log_?softmax).*"),
    ("optimizer", "the optimizer's step and zero_grad",
     r"optimizer\.(step|zero_grad).*"),
    ("scaler", "GradScaler: scaling the loss, unscaling and checking the gradients, updating the scale",
     r"ampbench\.scaler|amp_foreach_non_finite_check_and_unscale_?|amp_update_scale_?"),
    ("data", "the input pipeline: drawing and augmenting the batch, waiting for loader workers",
     r"ampbench\.data"),
    ("comm", "gradient all-reduce between ranks (DDP)",
     r"(nccl|gloo|c10d)[:_].*|.*all_?reduce.*|.*all_?gather.*|record_param_comms"),
]
NAMES = [name for name, _, _ in CATEGORIES] + ["idle", "other"]
ADDED = ("float8",)  # categories that result files of older ampbench releases lack (read as 0 ms)
WHAT = {name: what for name, what, _ in CATEGORIES}
WHAT.update(idle="CUDA only: the GPU waiting for the host, step time minus busy kernel time",
            other="everything else (view and allocation ops outside any of the above, Python between ops)")
STAGES = ("data", "loss", "optimizer", "scaler", "comm")  # win over anything inside them
KINDS = ("conv", "matmul", "norm", "elementwise")  # the outermost of these wins
TENSOR_CORE_WORK = ("conv", "matmul")
MEMORY_BOUND = ("norm", "elementwise")
DATA_LABEL = "ampbench.data"  # the profiler's label around drawing a batch (utils/explain/profiler.py)
SCALER_LABEL = "ampbench.scaler"  # and around each call of the loss scaler
STEP_MARK = "ProfilerStep"  # torch.profiler's mark around each step: its own time is Python between ops
PYTHON = "(Python, between ops)"
_PATTERNS = [(name, re.compile(pattern)) for name, _, pattern in CATEGORIES]
FLOAT8_SCALING = re.compile(r"amax|abs|max|reciprocal")  # float8 work inside an op that names float8


def core_name(name: str) -> str:
    """"autograd::engine::evaluate_function: ConvolutionBackward0" -> "convolution"."""
    name = name.split("evaluate_function: ")[-1].split("::")[-1]
    return re.sub(r"backward\d*$", "", name.lower()).lstrip("_") or name.lower()


def kind_of(name: str) -> Optional[str]:
    """The category an op's name alone says, or None."""
    if name.startswith(STEP_MARK):
        return None
    core = core_name(name)
    return next((category for category, pattern in _PATTERNS if pattern.fullmatch(core)), None)


def category_of(chain: Sequence[str]) -> str:
    """The category of the op at the end of `chain`, the names of its enclosing ops from the
    outermost in."""
    kinds = [kind_of(name) for name in chain]
    if FLOAT8_SCALING.fullmatch(core_name(chain[-1])) and any("float8" in name.lower() for name in chain[:-1]):
        kinds[-1] = "float8"
    for wanted in (STAGES, ("float8",), ("cast",)):
        inner = [kind for kind in kinds if kind is not None and kind in wanted]
        if inner:
            return inner[-1]
    outer = [kind for kind in kinds if kind in KINDS]
    return outer[0] if outer else "other"
