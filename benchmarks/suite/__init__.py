"""The GPU suite's wing, one module per job; benchmarks/gpu_suite.py is its entry point.

plan.py       the steps, each described once: name, section, commands as a user types them, priority
device.py     what the machine is: the device's label and the modes it refuses, the data the runs get
estimate.py   a step's time before it starts, read from its own commands (what --budget spends by)
ledger.py     suite.json: what ran, what waits, which folder a pass continues; running the steps
folders.py    the folders a pass writes, proven (and a device's locked) before any step
slices.py     a lent GPU's slice: the minutes a pass is given, and what a lease keeps back, learned
history.py    the suites saved across dates and commits, their documents, and the code changes
              after which older figures read differently
tables.py     the tables the run pages show, from saved documents alone, with legends of what they show
verdict.py    README's verdict table per GPU: the fastest mode of each model and size, against TF32 and FP32
advice.py     README's table across devices of the advise step's advice
render.py     the run page (results/<device>/<date>/README.md) and README's Results section
published.py  published figures printed beside the suite's own
"""
