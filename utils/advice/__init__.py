"""main.py --advise: which precision and speed levers to train with, measured on this machine
within a budget, every sentence of the advice with its evidence (docs/advice.md).

preflight.py  what the device and install run, the model's FLOPs, FP8's prediction: no timed step
plan.py       capabilities + estimates + budget -> the phases, each estimated (no torch)
session.py    the preflight, the plan, each phase a main.py process within the budget, the outputs
decide.py     saved results -> the advice: the mode, the levers, the sentences (no torch)
levers.py     the levers' table: what each switches, why it cannot be tried here, how its trial is taken
trials.py     each lever's trial in the results: kept or not, and when compiling pays back (no torch)
evidence.py   each figure's source in the saved results, and the way back from it to the value
document.py   advice.json, versioned and checked, and its statuses with their exit codes
report.py     the printed report: sentences, evidence table, the command to train with
commands.py   the user's flags passed to every phase, the advised command, the batch-job lines
"""
