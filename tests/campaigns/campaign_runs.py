"""What the two edge campaigns share: main.py run as a user runs it, in a process of its own,
and the runs its --json holds. It imports nothing of the project, so that
around_runs_campaign.py can ask any checkout."""
import json
import resource
import subprocess
import sys
from pathlib import Path


def main_py(root, argv, timeout=300, env=None, file_size=None):
    """`python main.py ARGV` in the checkout ROOT; with file_size, in a process whose files
    cannot grow past it (a full disk)."""
    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))
    return subprocess.run([sys.executable, str(Path(root) / "main.py"), *map(str, argv)], cwd=root,
                          capture_output=True, text=True, timeout=timeout, env=env,
                          preexec_fn=limit if file_size else None)


def runs_of(path):
    """The runs a --json file holds; none when the file was not written."""
    path = Path(path)
    return json.loads(path.read_text())["runs"] if path.exists() else []
