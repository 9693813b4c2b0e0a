"""Test harness: runs main.py with the process of rank 1 broken as $RANK1_FAULT says:
  raise (the default)  it raises at its first training step
  kill                 it kills itself with SIGKILL at its first training step (a lost node)
  args                 it is started with the extra arguments in $RANK1_ARGS (ranks that disagree)
Launch it like main.py with torchrun or mpirun, or by hand with RANK and WORLD_SIZE set, the
checkout on PYTHONPATH (as the tests set it)."""
import os
import signal
import sys

import main
from utils.training import loop

if os.environ.get("RANK", os.environ.get("OMPI_COMM_WORLD_RANK")) == "1":
    fault = os.environ.get("RANK1_FAULT", "raise")
    if fault == "args":
        sys.argv += os.environ["RANK1_ARGS"].split()
    else:
        def broken_step(*args, **kwargs):
            if fault == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise RuntimeError("injected failure on rank 1")
        loop.train_step = broken_step

sys.exit(main.main())
