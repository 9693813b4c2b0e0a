"""cluster/bundle.py: a folder an offline node installs from and trains on, built here
without network: the wheels come from a local index of hand-made wheels, CIFAR-10 from an
archive of the subset (whose md5 stands in for the official one where the bundle must succeed)."""
import contextlib
import hashlib
import importlib.metadata
import io
import json
import os
import re
import shlex
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

from cluster import bundle
from conftest import FAST, ROOT, SUBSET
from utils.data import cifar10

RUNNING = f"{sys.version_info[0]}.{sys.version_info[1]}"


def fake_wheel(folder, requirement):
    """A wheel of `requirement` (name==version) holding an empty package: what pip needs to
    download and install it."""
    name, _, version = requirement.partition("==")
    assert version and re.fullmatch(r"[\w.]+", version), f"{requirement}: an optional extra pins its version"
    dist = re.sub(r"[-_.]+", "_", name).lower()
    info = f"{dist}-{version}.dist-info"
    files = {f"{dist}/__init__.py": f'__version__ = "{version}"\n',
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    files[f"{info}/RECORD"] = "".join(f"{path},,\n" for path in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(folder / f"{dist}-{version}-py3-none-any.whl", "w") as wheel:
        for path, text in files.items():
            wheel.writestr(path, text)


def installed_wheel(folder, name):
    """A wheel of distribution `name` as this Python has it installed, its files packed again: the
    build backend a bundle carries (setuptools), real, since the node test builds an install with it."""
    dist = importlib.metadata.distribution(name)
    with zipfile.ZipFile(folder / f"{name}-{dist.version}-py3-none-any.whl", "w") as wheel:
        for file in dist.files:
            if file.parts[0] != ".." and "__pycache__" not in file.parts and file.name != "METADATA":
                wheel.write(dist.locate_file(file), file.as_posix())
        # for every Python a test bundles for (3.9 too), as PyPI has a release for each
        metadata = re.sub(r"^Requires-Python:.*\n", "", dist.read_text("METADATA"), flags=re.MULTILINE)
        wheel.writestr(f"{name}-{dist.version}.dist-info/METADATA", metadata)


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    """A local package index: a wheel for each requirement the optional extras hold here, and the
    build backend pyproject.toml names."""
    folder = tmp_path_factory.mktemp("index")
    for path in bundle.optional_requirement_files():
        for requirement in bundle.requirements_for(path, RUNNING):
            fake_wheel(folder, requirement)
    installed_wheel(folder, "setuptools")  # requirements-test.txt installs one that pyproject.toml's backend takes
    return folder


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    """The subset packed as the official archive is: cifar-10-python.tar.gz holding cifar-10-batches-py."""
    path = tmp_path_factory.mktemp("archive") / cifar10.ARCHIVE
    with tarfile.open(path, "w:gz") as tar:
        tar.add(SUBSET, arcname=cifar10.FOLDER)
    return path


def offline_pip(patch, index):
    """pip reads only `index`: no configuration file, no site index, no network."""
    for name in [name for name in os.environ if name.startswith("PIP_")]:
        patch.delenv(name)
    patch.setenv("PIP_CONFIG_FILE", os.devnull)
    patch.setenv("PIP_NO_INDEX", "1")
    patch.setenv("PIP_FIND_LINKS", str(index))


@pytest.fixture
def offline(monkeypatch, index, archive):
    """The local index for pip, and the subset's archive taken for the official one."""
    offline_pip(monkeypatch, index)
    monkeypatch.setattr(cifar10, "ARCHIVE_MD5", hashlib.md5(archive.read_bytes()).hexdigest())


def run_bundle(*args):
    """bundle.main(args) in this process; returns (status, stderr)."""
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            status = bundle.main([str(arg) for arg in args])
        except SystemExit as exit:  # argparse's own refusals
            status = exit.code
    return status, err.getvalue()


def assert_refused(status, err, *phrases):
    assert status == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert all(phrase in err for phrase in phrases), err


@pytest.fixture(scope="module")
def bundled(tmp_path_factory, index, archive):
    """A bundle for this Python, its suite given 7 minutes."""
    folder = tmp_path_factory.mktemp("node") / "bundle"
    with pytest.MonkeyPatch.context() as patch:
        offline_pip(patch, index)
        patch.setattr(cifar10, "ARCHIVE_MD5", hashlib.md5(archive.read_bytes()).hexdigest())
        assert run_bundle(folder, "--cifar10", archive, "--budget", 7) == (0, "")
    return folder


def strict_json(path):
    def refuse(word):
        raise AssertionError(f"{path} holds {word}")

    return json.loads(path.read_text(), parse_constant=refuse)


def test_the_optional_extras_are_the_requirements_files_but_the_install_sets_and_never_torch():
    names = [path.name for path in bundle.optional_requirement_files()]
    assert "requirements-fp8.txt" in names and not set(names) & set(bundle.INSTALL_SETS)
    assert all((ROOT / name).is_file() for name in bundle.INSTALL_SETS)
    for path in bundle.optional_requirement_files():
        for minor in range(bundle.compat.PYTHONS[0][1], bundle.compat.PYTHONS[1][1] + 1):
            named = {re.split(r"[=<>!~ ]", need)[0].lower() for need in bundle.requirements_for(path, f"3.{minor}")}
            assert not named & {"torch", "torchvision"}, f"{path.name} names {named}: the node's container has them"


def test_the_build_backend_is_read_from_pyproject_as_tomllib_reads_it():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 and later; bundle.py reads it on 3.8 too
    with open(ROOT / "pyproject.toml", "rb") as f:
        assert bundle.build_requirements() == tomllib.load(f)["build-system"]["requires"] == ["setuptools>=70.1"]


def test_markers_are_read_for_the_node_python_not_this_one(tmp_path):
    extras = tmp_path / "requirements-x.txt"
    extras.write_text('# an extra\nnew==1.0; python_version >= "3.10"  # why\nold==2.0; python_version < "3.10"\n'
                      "any==3.0\n")
    assert bundle.requirements_for(extras, "3.9") == ["old==2.0", "any==3.0"]
    assert bundle.requirements_for(extras, "3.12") == ["new==1.0", "any==3.0"]


def test_a_glibc_platform_takes_every_older_manylinux_wheel_as_a_node_would():
    tags = bundle.accepted_platforms("manylinux_2_28_aarch64")
    assert tags[0] == "manylinux_2_28_aarch64" and "manylinux_2_17_aarch64" in tags
    assert "manylinux2014_aarch64" in tags and "manylinux_2_29_aarch64" not in tags
    assert bundle.accepted_platforms("linux_x86_64") == ["linux_x86_64"]
    assert re.fullmatch(r"manylinux_2_\d+_\w+", bundle.running_platform())


def test_the_bundle_holds_the_wheels_the_data_and_a_strict_manifest_with_every_file_hash(bundled):
    manifest = strict_json(bundled / bundle.MANIFEST)
    assert manifest["python"] == RUNNING and manifest["platform"] == bundle.running_platform()
    on_disk = {path.relative_to(bundled).as_posix() for path in bundled.rglob("*") if path.is_file()}
    assert on_disk == set(manifest["files"]) | {bundle.MANIFEST}  # nothing else, no leftover staging
    for name, sha256 in manifest["files"].items():
        assert hashlib.sha256((bundled / name).read_bytes()).hexdigest() == sha256
    assert len(list((bundled / "wheels").glob("*.whl"))) == len(manifest["wheels"]) >= 1
    assert "wheels/torchao-" in " ".join(manifest["files"])
    assert sorted(path.name for path in (bundled / "data" / cifar10.FOLDER).iterdir()) == sorted(
        name for name, _ in cifar10.TRAIN_FILES + cifar10.TEST_FILES + [cifar10.META_FILE])
    extras = [pin for pin in manifest["wheels"] if not pin.startswith("setuptools==")]
    assert len(extras) == len(manifest["wheels"]) - 1  # the build backend: built with, never installed
    install, suite = manifest["command"].split(" && ")
    assert install == shlex.join(["python", "-m", "pip", "install", "--no-index", "--find-links",
                                  str(bundled / "wheels"), "--no-deps", *extras, "-e", str(ROOT)])
    assert suite == shlex.join(["python", str(ROOT / "benchmarks" / "gpu_suite.py"), "--budget", "7",
                                "--data-dir", str(bundled / "data")])


def test_a_bundle_for_an_older_python_leaves_out_what_its_markers_exclude(tmp_path, offline, archive):
    folder = tmp_path / "bundle"
    assert run_bundle(folder, "--cifar10", archive, "--python", "3.9", "--platform", "manylinux_2_28_aarch64") \
        == (0, "")
    manifest = strict_json(folder / bundle.MANIFEST)
    assert manifest["optional_requirements"]["requirements-fp8.txt"] == []  # torchao needs Python 3.10
    assert (manifest["python"], manifest["platform"]) == ("3.9", "manylinux_2_28_aarch64")
    assert not any(wheel.startswith("torchao") for wheel in manifest["wheels"])  # other extras may fit 3.9


@pytest.mark.parametrize("python", ["3.99", "2.7", "3", "310", "three"])
def test_an_unknown_python_is_refused_before_anything_is_written(tmp_path, python):
    assert_refused(*run_bundle(tmp_path / "bundle", "--python", python), f"Python {python} is not one")
    assert not (tmp_path / "bundle").exists()


def test_a_dir_that_cannot_be_written_is_refused(tmp_path):
    (tmp_path / "file").write_text("")
    assert_refused(*run_bundle(tmp_path / "file" / "bundle"), "cannot write DIR")


def test_a_dir_holding_other_files_is_refused_and_left_alone(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    assert_refused(*run_bundle(tmp_path), "holds notes.txt, which no bundle writes")
    assert [path.name for path in tmp_path.iterdir()] == ["notes.txt"]


def test_an_archive_that_is_not_the_official_one_is_refused_and_nothing_stays(tmp_path, monkeypatch, index,
                                                                              archive):
    offline_pip(monkeypatch, index)
    assert_refused(*run_bundle(tmp_path / "bundle", "--cifar10", archive), "is not the official CIFAR-10 archive",
                   cifar10.ARCHIVE_MD5)
    assert not (tmp_path / "bundle").exists()


def test_the_archive_is_downloaded_checked_unpacked_and_not_kept(tmp_path, offline, monkeypatch, archive):
    """The download path, from a local server: the bundle holds the batch files, not the archive."""
    import functools
    import http.server
    import threading
    import urllib.request
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(archive.parent))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setattr(cifar10, "URL", f"http://127.0.0.1:{server.server_port}/{archive.name}")
    monkeypatch.delenv("http_proxy")
    urllib.request.install_opener(None)  # urlopen keeps the proxies of its first call: build it anew, and after
    try:
        status, err = run_bundle(tmp_path / "bundle", "--python", "3.9")
        assert status == 0, err
    finally:
        urllib.request.install_opener(None)
        server.shutdown()
    manifest = strict_json(tmp_path / "bundle" / bundle.MANIFEST)
    assert manifest["cifar10"]["source"] == cifar10.URL and not list((tmp_path / "bundle").rglob("*.tar.gz"))
    assert len(list((tmp_path / "bundle" / "data" / cifar10.FOLDER).iterdir())) == 7


def test_without_network_the_download_fails_fast_and_nothing_stays(tmp_path, offline):
    # conftest's proxy refuses every connection, as a compute node's network does
    assert_refused(*run_bundle(tmp_path / "bundle"), "could not download CIFAR-10 from", "--cifar10 PATH")
    assert not (tmp_path / "bundle").exists()


def test_a_wheel_pip_cannot_find_is_one_sentence_and_nothing_stays(tmp_path, offline, monkeypatch, archive):
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))  # an index without the wheels
    assert_refused(*run_bundle(tmp_path / "bundle", "--cifar10", archive), "pip could not download ", "torchao==")
    assert not (tmp_path / "bundle").exists()


def test_a_failed_rebuild_keeps_the_earlier_bundle_whole(tmp_path, offline, archive):
    folder = tmp_path / "bundle"
    assert run_bundle(folder, "--cifar10", archive) == (0, "")
    before = {path: path.read_bytes() for path in folder.rglob("*") if path.is_file()}
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(archive.read_bytes()[:1000])
    assert_refused(*run_bundle(folder, "--cifar10", bad), "is not the official CIFAR-10 archive")
    assert {path: path.read_bytes() for path in folder.rglob("*") if path.is_file()} == before


def files_of(folder):
    return {path: path.read_bytes() for path in folder.rglob("*") if path.is_file()}


def test_a_rebuild_that_fails_mid_swap_puts_the_earlier_bundle_back(tmp_path, offline, archive, monkeypatch):
    folder = tmp_path / "bundle"
    assert run_bundle(folder, "--cifar10", archive) == (0, "")
    before = files_of(folder)
    replace = os.replace

    def full_disk_at_the_data(source, target):
        staged = Path(source).parent.name.startswith(bundle.STAGING) and not Path(source).parent.name.startswith(
            bundle.RETIRED)
        if staged and Path(source).name == bundle.DATA:
            raise OSError(28, "No space left on device")  # the earlier bundle is aside, the new wheels are in
        replace(source, target)
    monkeypatch.setattr(bundle.os, "replace", full_disk_at_the_data)
    status, err = run_bundle(folder, "--cifar10", archive)
    assert status == 1 and "No space left on device" in err and "is kept as it was" in err, err
    assert files_of(folder) == before and sorted(path.name for path in folder.iterdir()) == ["data", "manifest.json",
                                                                                              "wheels"]


def test_a_swap_cut_by_a_kill_is_undone_by_the_next_run_even_one_that_fails(tmp_path, offline, archive):
    folder = tmp_path / "bundle"
    assert run_bundle(folder, "--cifar10", archive) == (0, "")
    before = files_of(folder)
    retired = folder / (bundle.RETIRED + "killed")  # as publish() leaves it killed after the new wheels moved in
    retired.mkdir()
    for name in (bundle.MANIFEST, bundle.WHEELS):
        os.replace(folder / name, retired / name)
    (folder / bundle.WHEELS).mkdir()
    (folder / bundle.WHEELS / "new-1.0-py3-none-any.whl").write_text("half a swap")
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(archive.read_bytes()[:1000])
    assert_refused(*run_bundle(folder, "--cifar10", bad), "is not the official CIFAR-10 archive")
    assert files_of(folder) == before and not list(folder.glob(".bundle-*"))


def lock(path, locked=True):
    """Make `path` a file nobody may remove (chattr +i where the tests run as root, else a
    read-only folder around it), or, with locked=False, removable again."""
    if os.geteuid() == 0:
        if subprocess.run(["chattr", "+i" if locked else "-i", str(path)], capture_output=True).returncode:
            pytest.skip("running as root on a file system without chattr +i: nothing is read-only here")
    else:
        path.parent.chmod(0o555 if locked else 0o755)


def test_an_earlier_bundle_that_cannot_be_removed_is_named_with_the_command_that_removes_it(tmp_path, offline,
                                                                                            archive):
    folder = tmp_path / "bundle"
    assert run_bundle(folder, "--cifar10", archive) == (0, "")
    stuck = folder / bundle.DATA / "locked" / "file"
    stuck.parent.mkdir()
    stuck.write_text("the earlier bundle's")
    lock(stuck)
    try:
        status, err = run_bundle(folder, "--cifar10", archive)
        (retired,) = folder.glob(bundle.RETIRED + "*")
        stuck = retired / bundle.DATA / "locked" / "file"
        assert status == 0 and err == (
            f"bundle.py: warning: could not remove {retired}, which holds the earlier bundle, set aside for this one "
            f"({'Operation not permitted' if os.geteuid() == 0 else 'Permission denied'}: {stuck}); remove it "
            f"yourself once you can: rm -rf {retired}\n"), err
        assert (folder / bundle.MANIFEST).exists()  # the new bundle is whole
        said_again = err.replace("the earlier bundle, set aside for this one", "an earlier bundle, set aside")
        assert run_bundle(folder, "--cifar10", archive) == (0, said_again)  # each run says it while it stays
    finally:
        lock(stuck, locked=False)
    assert run_bundle(folder, "--cifar10", archive) == (0, "")  # once it can go, the next run removes it
    assert not list(folder.glob(".bundle-*"))


def test_a_second_bundle_into_a_folder_being_written_is_refused_and_changes_nothing(tmp_path, offline, archive):
    folder = tmp_path / "bundle"
    assert run_bundle(folder, "--cifar10", archive) == (0, "")
    before = files_of(folder)
    with bundle.held_or_refused(str(folder), "held by the test"):  # as the first bundle.py holds it
        assert_refused(*run_bundle(folder, "--cifar10", archive), f"another bundle.py is writing {folder} now")
    assert files_of(folder) == before


def test_an_archive_without_a_batch_file_is_refused_and_nothing_stays(tmp_path, offline, monkeypatch):
    partial = tmp_path / cifar10.ARCHIVE
    with tarfile.open(partial, "w:gz") as tar:
        tar.add(SUBSET / "data_batch_1", arcname=f"{cifar10.FOLDER}/data_batch_1")
    monkeypatch.setattr(cifar10, "ARCHIVE_MD5", hashlib.md5(partial.read_bytes()).hexdigest())
    assert_refused(*run_bundle(tmp_path / "bundle", "--cifar10", partial), "is not a readable CIFAR-10 archive",
                   "data_batch_2' not found")
    assert not (tmp_path / "bundle").exists()


def test_bundle_py_refuses_as_a_user_sees_it(tmp_path):
    result = subprocess.run([sys.executable, str(ROOT / "cluster" / "bundle.py"), str(tmp_path / "b"),
                             "--python", "3.7"], capture_output=True, text=True, timeout=60)
    assert_refused(result.returncode, result.stderr, "bundle.py: error: Python 3.7 is not one ampbench runs on")


@pytest.mark.whole_runs
def test_the_node_installs_the_bundle_offline_leaving_torch_and_trains_on_its_data(tmp_path, bundled):
    """A fresh venv that sees this torch as a node sees its container's: the manifest's install
    command, run offline, adds the extras' wheels and this checkout, editable, and nothing else
    (its build backend only builds); main.py then trains on the bundled data, and the GPU suite
    runs by its path from any folder."""
    manifest = strict_json(bundled / bundle.MANIFEST)
    bundled_names = {pin.split("==")[0] for pin in manifest["wheels"]}
    container = tmp_path / "container"  # this Python's packages but the bundled ones and ampbench: torch, numpy, pip
    container.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not (entry.name.endswith(".dist-info") and entry.name.split("-")[0] in bundled_names
                or entry.name.startswith(("ampbench", "__editable__"))):  # a container has no ampbench
            (container / entry.name).symlink_to(entry)
    venv = tmp_path / "node"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "container.pth").write_text(f"{container}\n")  # underneath the venv's own site-packages
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PIP_") and k != "PYTHONPATH"},
           "PIP_CONFIG_FILE": os.devnull}  # without the tests' PYTHONPATH: the install alone finds ampbench
    install = shlex.split(manifest["command"].split(" && ")[0])
    assert install[0] == "python"
    done = subprocess.run([python, *install[1:]], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    installed = {path.name.split("-")[0] for path in site.glob("*.dist-info")}
    assert installed == bundled_names - {"setuptools"} | {"ampbench"}  # no torch, no dependency, no backend
    suite = subprocess.run([python, str(ROOT / "benchmarks" / "gpu_suite.py"), "-h"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=120)
    assert suite.returncode == 0 and suite.stdout.startswith("usage: gpu_suite.py"), suite.stderr
    result = subprocess.run([python, str(ROOT / "main.py"), *FAST, "-n", "2", "--warmup", "1", "--no-eval",
                             "--data-dir", str(bundled / "data"), "--allow-unverified", "--no-download", "--json",
                             str(tmp_path / "r.json")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    document = strict_json(tmp_path / "r.json")
    assert document["data"]["name"] == "cifar10" and document["runs"][0]["steps"] == 2
