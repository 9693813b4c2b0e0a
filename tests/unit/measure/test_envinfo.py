"""What a result records of the code it ran."""
import subprocess

from utils.measure import envinfo


def git(folder, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=folder, check=True,
                   capture_output=True)


def test_two_dirty_trees_are_told_apart_and_a_clean_one_has_no_diff_digest(tmp_path, monkeypatch):
    monkeypatch.setattr(envinfo, "PROJECT_DIR", str(tmp_path))
    git(tmp_path, "init", "-q")
    (tmp_path / "a.py").write_text("x = 1\n")
    git(tmp_path, "add", "a.py")
    git(tmp_path, "commit", "-qm", "a")
    assert envinfo.diff_digest() is None
    (tmp_path / "a.py").write_text("x = 2\n")
    first = envinfo.diff_digest()
    (tmp_path / "a.py").write_text("x = 3\n")
    second = envinfo.diff_digest()
    assert len(first) == 64 and first != second
    assert envinfo.command_output(["git", "describe", "--always", "--dirty"]).endswith("-dirty")
