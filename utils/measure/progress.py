"""A tqdm progress bar on stderr (loss, step ms, img/s) that never makes the host wait for the GPU.

On CUDA the shown loss is copied to pinned host memory without blocking and displayed at a
later refresh, once its copy has finished; step ms and img/s are host wall-clock rates
between refreshes. The bar is off when stderr is not a terminal (batch jobs) or on request.
"""
import sys
import time

from tqdm import tqdm

from utils.measure.hostcopy import HostCopy

REFRESH_S = 0.5


class Progress:
    def __init__(self, total, label, batch_size, enabled=True, initial=0):
        self.enabled = enabled and sys.stderr.isatty()
        self.bar = tqdm(total=total, initial=initial, desc=label, file=sys.stderr, disable=not self.enabled,
                        dynamic_ncols=True, leave=False)
        self.batch_size = batch_size
        self.last_time = time.perf_counter()
        self.last_step = 0
        self.step = 0
        self.host_loss = None  # HostCopy of a recent loss, on CUDA

    def update(self, loss):
        self.step += 1
        if not self.enabled:
            return
        self.bar.update(1)
        now = time.perf_counter()
        if now - self.last_time < REFRESH_S:
            return
        step_ms = (now - self.last_time) * 1000.0 / (self.step - self.last_step)
        self.last_time, self.last_step = now, self.step
        self.bar.set_postfix(loss=self.read_loss(loss), step_ms=f"{step_ms:.1f}",
                             img_s=f"{self.batch_size * 1000.0 / step_ms:.0f}", refresh=False)

    def read_loss(self, loss):
        if loss.device.type != "cuda":
            return f"{loss.item():.3f}"
        shown = "..."
        if self.host_loss is not None and self.host_loss.done():
            shown = f"{self.host_loss.value():.3f}"
        if self.host_loss is None or self.host_loss.done():
            self.host_loss = HostCopy(loss)
        return shown

    def close(self):
        self.bar.close()
