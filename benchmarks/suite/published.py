"""Published training figures that the GPU suite's `native` section prints beside its own, keyed
by the device name torch.cuda.get_device_name() gives: a GPU not listed gets no such column."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict


@dataclass(frozen=True)
class Published:
    """ResNet-50 v1.5 training throughput at 224x224 in images per second, TF32 and AMP (float16)."""
    tf32_images_per_sec: float
    amp_images_per_sec: float
    batch: int
    source: str

    @property
    def amp_speedup(self) -> float:
        return self.amp_images_per_sec / self.tf32_images_per_sec


# NVIDIA DeepLearningExamples, PyTorch/Classification/ConvNets/resnet50v1.5/README.md, "Training
# performance: NVIDIA DGX A100 (8x A100 80GB)", the 1-GPU row at batch 256: TF32 938 img/s, AMP
# 2470 img/s (2.63x). NVIDIA's runs read ImageNet through DALI; the suite's read synthetic images
# or CIFAR-10 upsampled on the GPU, so the comparison is of the training step, not the input pipeline.
NVIDIA_DLE = ("NVIDIA DeepLearningExamples, PyTorch ResNet-50 v1.5 README, training performance, "
              "A100 80GB, batch 256, one GPU")
RESNET50: Dict[str, Published] = {"NVIDIA A100-SXM4-80GB": Published(938.0, 2470.0, 256, NVIDIA_DLE)}



@dataclass(frozen=True)
class PerGpuRate:
    """A tuned submission's ResNet-50 training throughput per GPU, in images per second."""
    images_per_sec_per_gpu: float
    source: str


# MLCommons training_results_v3.0, NVIDIA/results/dgxh100_ngc23.04_mxnet/resnet/result_0.txt:
# NVIDIA's closed-division ResNet-50 v1.5 on one DGX H100 (8x H100-SXM5-80GB, MXNet, DALI, mixed
# precision); the log's per-epoch "tracked_stats" throughput over epochs 12 to 27 has a median of
# 56,073 images per second, 7,009 per GPU.
MLPERF_V3_0 = ("MLPerf Training v3.0, NVIDIA closed division, one DGX H100 (8x H100-SXM5-80GB, MXNet, DALI), "
               "ResNet-50 v1.5: the median per-epoch throughput of its result_0 log, 56,073 img/s, over 8 GPUs")
MLPERF_RESNET50: Dict[str, PerGpuRate] = {"NVIDIA H100 80GB HBM3": PerGpuRate(56073.0 / 8, MLPERF_V3_0)}
