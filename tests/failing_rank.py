"""Test harness: runs main.py, but the process with rank 1 raises at its first training step.
Launch it like main.py with torchrun or mpirun to see that a failing rank ends the job."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import main  # noqa: E402
from utils.training import loop  # noqa: E402

if os.environ.get("RANK", os.environ.get("OMPI_COMM_WORLD_RANK")) == "1":
    def broken_step(*args, **kwargs):
        raise RuntimeError("injected failure on rank 1")
    loop.train_step = broken_step

sys.exit(main.main())
