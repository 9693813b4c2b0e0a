"""--advise's preflight on the CPU: the modes check_supported allows, the levers that apply, and
FP8's roofline prediction, which keeps an fp8 mode predicted under 0.95x of amp-bf16 untimed and
which the advice then cites; the planner and the decider import no torch."""
import subprocess
import sys

import pytest
import torch

from conftest import ROOT, third_repeat
from utils.advice import preflight as preflighting
from utils.advice import session
from utils.advice.decide import Context
from utils.config import RunConfig
from utils.results.merge import load_result
from utils.training import cpu_arithmetic
from utils.training.start import seeded_model

H100 = "NVIDIA H100 80GB HBM3"


def test_the_planner_and_the_decider_import_no_torch():
    code = ("import sys; import utils.advice.plan, utils.advice.decide, utils.advice.report, utils.advice.document; "
            "sys.exit('torch' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


@pytest.mark.parametrize("flags, fp16_timed", [(["avx512_bf16"], False), (["avx512_bf16", "avx512_fp16"], True)])
def test_on_a_cpu_fp32_and_amp_bf16_are_timed_and_tf32_and_fp8_are_not(flags, fp16_timed, monkeypatch):
    """amp-fp16 is timed only where the CPU lists fast float16 arithmetic (Sapphire Rapids does)."""
    monkeypatch.setattr(cpu_arithmetic, "cpu_flags", lambda: flags)
    config = RunConfig.build(advise=True, model="resnet18", stem="imagenet", batch_size=16)
    timed, not_timed = preflighting.timed_modes(config.precision, torch.device("cpu"))
    assert timed == ["fp32", *["amp-fp16"] * fp16_timed, "amp-bf16"]  # in MODES' order
    assert ("amp-fp16" in not_timed) != fp16_timed
    assert not_timed["tf32"] == "mode tf32 only applies to CUDA GPUs"
    assert {"fp8", "fp8-rowwise"} <= set(not_timed)
    tried, why_not = preflighting.levers(config.training, config.data, config.command_line, torch.device("cpu"))
    assert "cuda graphs" in why_not and dict(tried)["channels-last"] == {"channels_last": True}
    vit = RunConfig.build(advise=True, model="vit_t4", batch_size=16)
    assert "channels-last" in preflighting.levers(vit.training, vit.data, vit.command_line, torch.device("cpu"))[1]


def test_fp8_predicted_slower_than_bf16_is_not_timed_and_the_advice_cites_the_prediction():
    config = RunConfig.build(advise=True, model="vit_t4", batch_size=64)
    timed, not_timed = ["fp32", "amp-bf16", "fp8"], {}
    model = seeded_model(config.training, config.data)
    predictions, facts = preflighting.fp8_predictions(config.training, config.data, config.speed, model, H100, timed,
                                                      not_timed)
    speedup = predictions["fp8"]["speedup"]
    assert speedup < preflighting.FP8_WORTH and "fp8" not in timed
    assert not_timed["fp8"] == f"predicted {speedup:.2f}x amp-bf16's speed on an H100 SXM, under 0.95x"
    assert facts["fp8"]["layers"] and all(layer["speedup"] > 0 for layer in facts["fp8"]["layers"])
    documents = third_repeat(load_result(str(ROOT / "results" / "NVIDIA-H100-80GB-HBM3" / "2026-11-26" /
                                             "headline-resnet18.json")))
    context = Context("headline-resnet18.json", not_timed, predictions)
    advice = session.advice_document(documents, context, None, None, [])
    advice["preflight"] = {"fp8": facts, "not_timed": not_timed}
    (rejected,) = [entry for entry in advice["rejected"] if entry["mode"] == "fp8"]
    (cited,) = [entry for entry in advice["evidence"] if entry["id"] == rejected["evidence"][0]]
    assert cited["kind"] == "predicted" and cited["value"] == speedup
    assert cited["source"] == {"advice": ["preflight", "fp8", "fp8", "speedup"]}


def test_a_model_with_nothing_fp8_converts_is_not_timed_in_fp8():
    config = RunConfig.build(advise=True, model="resnet18", batch_size=64)
    timed, not_timed = ["fp32", "fp8-rowwise"], {}
    model = seeded_model(config.training, config.data)
    preflighting.fp8_predictions(config.training, config.data, config.speed, model, H100, timed, not_timed)
    assert timed == ["fp32"] and not_timed["fp8-rowwise"].startswith("model resnet18 has no nn.Linear layer")


def test_the_loaders_levers_are_planned_for_streamed_data_only_each_with_why_not():
    from utils.advice.levers import LOADER
    from utils.config import usable_cores

    def loader_levers(config):
        tried, why_not = preflighting.levers(config.training, config.data, config.command_line, torch.device("cpu"))
        return (tuple(lever for lever in tried if lever[0] in LOADER),
                {lever: why for lever, why in why_not.items() if lever in LOADER})

    streamed = RunConfig.build(advise=True, model="resnet18", data="imagefolder", data_dir="anywhere",
                               loader="stream", workers=0)
    tried, why_not = loader_levers(streamed)
    assert dict(tried) == {"more workers": {"workers": usable_cores()}}
    assert why_not["GPU decode"].startswith("--decode gpu decodes JPEGs on a CUDA GPU, and this run is on the CPU")
    every = RunConfig.build(advise=True, model="resnet18", data="webdataset", data_dir="anywhere",
                            workers=usable_cores())
    assert loader_levers(every)[0] == () and "more workers" in loader_levers(every)[1]
    cifar = RunConfig.build(advise=True, model="resnet18")
    assert loader_levers(cifar) == ((), {})
