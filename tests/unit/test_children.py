"""utils/children.py, the one way ampbench starts a process: it ends at its deadline (SIGTERM,
then SIGKILL after its grace), its whole tree ends with it (a grandchild in a session of its own
too), and it dies with its parent even when the parent is killed with SIGKILL, as do the ranks
main.py runs under a launcher it started. No torch."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from utils import children

SLEEPER = "import signal, sys, time\n{obey}\nprint('ready', flush=True)\nwhile True:\n    time.sleep(0.05)\n"
OBEYS = "signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(128 + number))"
IGNORES = "signal.signal(signal.SIGTERM, signal.SIG_IGN)"


def gone_within(pids, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(children.alive(pid) for pid in pids):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("obeys", [True, False])
def test_a_child_gets_sigterm_at_its_deadline_and_sigkill_after_its_grace(tmp_path, obeys):
    with open(tmp_path / "log", "w") as output:
        started = time.monotonic()
        returncode, elapsed = children.run(
            [sys.executable, "-c", SLEEPER.format(obey=OBEYS if obeys else IGNORES)], output,
            time.monotonic() + 1.0, lambda: False, grace_s=1.0)
    took = time.monotonic() - started
    if obeys:
        assert returncode == 143 and 1.0 <= took < 2.5
    else:
        assert returncode == -signal.SIGKILL and 2.0 <= took < 3.5
    assert abs(elapsed - took) < 0.5 and "ready" in (tmp_path / "log").read_text()


def test_a_stop_request_ends_it_as_the_deadline_does(tmp_path):
    asked = []
    with open(tmp_path / "log", "w") as output:
        returncode, _ = children.run([sys.executable, "-c", SLEEPER.format(obey=OBEYS)], output,
                                     time.monotonic() + 60, lambda: bool(asked.append(1)) or len(asked) > 5,
                                     grace_s=5.0)
    assert returncode == 143


GRANDPARENT = textwrap.dedent("""
    import os, subprocess, sys, time
    grandchild = subprocess.Popen([sys.executable, "-c", "import time\\nwhile True: time.sleep(0.05)"],
                                  start_new_session=True)
    print(grandchild.pid, flush=True)
    while True:
        time.sleep(0.05)
""")


def test_its_whole_tree_ends_with_it_a_grandchild_in_a_session_of_its_own_too(tmp_path):
    log = tmp_path / "log"
    with open(log, "w") as output:
        child = children.Child([sys.executable, "-c", GRANDPARENT], output)
        deadline = time.monotonic() + 10
        while not log.read_text().strip() and time.monotonic() < deadline:
            time.sleep(0.05)
        grandchild = int(log.read_text().split()[0])
        assert children.alive(grandchild)
        child.terminate()
        child.finish()
    assert gone_within([child.pid, grandchild], 5)


PARENT = textwrap.dedent("""
    import sys, time
    from utils import children
    child = children.Child([sys.executable, "-c", sys.argv[1]])
    print(child.pid, flush=True)
    while True:
        time.sleep(0.05)
""")
# A launcher's rank, as main.py ties itself: it dies with the launcher, which dies with the parent.
LAUNCHER = textwrap.dedent("""
    import subprocess, sys, time
    rank = subprocess.Popen([sys.executable, "-c", "from utils import children\\nchildren.tie_this_process()\\n"
                             "import time\\nwhile True: time.sleep(0.05)"], start_new_session=True)
    print(rank.pid, flush=True)
    while True:
        time.sleep(0.05)
""")


@pytest.mark.parametrize("what", ["a child", "a launcher and its rank"])
def test_a_child_dies_with_its_parent_even_when_the_parent_is_killed_with_sigkill(tmp_path, what):
    program = LAUNCHER if what != "a child" else "import time\nwhile True: time.sleep(0.05)"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, program], stdout=subprocess.PIPE, text=True,
                              cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    child = int(parent.stdout.readline())
    pids = [child]
    if what != "a child":  # the launcher prints its rank's pid to the parent's output
        pids.append(int(parent.stdout.readline()))
    assert all(children.alive(pid) for pid in pids)
    parent.kill()
    parent.wait()
    assert gone_within(pids, 5), [pid for pid in pids if children.alive(pid)]
