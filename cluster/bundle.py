"""Everything an offline compute node needs to run the GPU suite, in one folder.

    python cluster/bundle.py DIR                       # on a login node, with network
    python cluster/bundle.py DIR --python 3.10 --platform manylinux_2_28_aarch64 --budget 15
    python cluster/bundle.py DIR --cifar10 ~/cifar-10-python.tar.gz   # an archive at hand

Compute nodes (ALCF ThetaGPU's, Polaris's) have no internet, and their GPU time comes in short
slices. Run where there is network, this writes into DIR:

* wheels/: the wheels of the optional extras, for the node's Python and platform, without their
  dependencies and never torch (the node's container has it). An optional extra is each
  requirements-*.txt beside main.py but the two install sets, requirements-container.txt and
  requirements-test.txt; its markers are read for the node's Python (pip reads them for its own).
  Beside them, the build backend pyproject.toml names (setuptools), which pip needs on the node to
  install this checkout, editable, offline;
* data/cifar-10-batches-py/: CIFAR-10 from the official archive (or --cifar10's copy of it),
  md5-checked and unpacked: main.py's --data-dir reads the batch files, not the archive;
* manifest.json: what DIR holds, for which Python and platform, each file's sha256, and the
  command that, on the node, installs the extras and this checkout offline and runs gpu_suite.py
  --budget.

A user error (no network, a wrong md5, DIR not writable, another bundle.py writing DIR, ...)
exits 2 with one sentence, a disk that fails mid-write 1. Everything is built in a hidden folder
inside DIR, then swapped in by renames, manifest.json last, so a DIR without manifest.json is no
bundle; a bundle DIR held before survives any failure whole (publish(), tidy()). A hidden folder
that cannot be removed (a file in it immutable, a folder read-only) is named in a warning, with
why and the command that removes it, never left behind unseen.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import http.client
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import urllib.request
import zlib
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple, TypedDict

from utils import compat, console  # no torch
from utils.clock import now_utc
from utils.errors import UserError, WriteFailed
from utils.fileio import ensure_folder_writable, held_or_refused

ROOT = Path(__file__).resolve().parents[1]

INSTALL_SETS = ("requirements-container.txt", "requirements-test.txt")  # what ampbench needs; not extras
MANIFEST = "manifest.json"
WHEELS, DATA = "wheels", "data"
STAGING = ".bundle-"  # the hidden folder a bundle is built in; one left there was killed mid-way
RETIRED = STAGING + "retired-"  # where publish() sets the earlier bundle aside while the new one moves in
LEGACY_MANYLINUX = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}  # the old names of glibc 2.N's
CHUNK = 1 << 20


def parse(argv: Optional[List[str]]) -> argparse.Namespace:
    parser = console.Parser("bundle.py", prog="python cluster/bundle.py", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dir", metavar="DIR", help="the folder to fill (created if missing; new, empty or a bundle)")
    parser.add_argument("--python", metavar="X.Y", help="the node's Python (default: the one running this)")
    parser.add_argument("--platform", metavar="TAG", help="the node's platform as pip names it, e.g. "
                        "manylinux_2_28_x86_64 (glibc 2.28) or manylinux_2_28_aarch64 (default: this machine's)")
    parser.add_argument("--cifar10", metavar="PATH", help="an already downloaded cifar-10-python.tar.gz to use "
                        "instead of downloading it (md5-checked too)")
    parser.add_argument("--budget", metavar="MINUTES", type=minutes, default=10,
                        help="the minutes the node's command gives gpu_suite.py --budget (default 10)")
    return parser.parse_args(argv)


def minutes(text: str) -> int:
    """--budget's value: whole minutes, as gpu_suite.py's --budget reads them whatever its type."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a whole number of minutes, 1 or more, is needed, not {text!r}")
    return int(text)


def target_python(asked: Optional[str]) -> str:
    """The node's Python as X.Y: --python, checked, or the one running this."""
    if asked is None:
        asked = f"{sys.version_info[0]}.{sys.version_info[1]}"
    match = re.fullmatch(r"(\d+)\.(\d+)", asked)
    oldest, newest = compat.PYTHONS
    if not match or not oldest <= (int(match.group(1)), int(match.group(2))) <= newest:
        raise UserError(f"Python {asked} is not one ampbench runs on ({oldest[0]}.{oldest[1]} to "
                        f"{newest[0]}.{newest[1]}); give the node's Python as --python X.Y, e.g. --python 3.10.")
    return asked


def running_platform() -> str:
    """This machine's platform as pip names it: manylinux_2_N_ARCH on a Linux with glibc 2.N."""
    libc, version = platform.libc_ver()
    match = re.match(r"2\.(\d+)", version)
    if libc == "glibc" and match:
        return f"manylinux_2_{match.group(1)}_{platform.machine()}"
    return re.sub(r"[-.]", "_", sysconfig.get_platform())


def accepted_platforms(tag: str) -> List[str]:
    """The platform tags of the wheels a node of `tag` runs. A glibc 2.N node runs every
    manylinux wheel for glibc 2.N or older, but pip, given one --platform, takes only that tag."""
    match = re.fullmatch(r"manylinux_2_(\d+)_(\w+)", tag)
    if not match:
        return [tag]
    arch, tags = match.group(2), []
    for minor in range(int(match.group(1)), 4, -1):
        tags.append(f"manylinux_2_{minor}_{arch}")
        if minor in LEGACY_MANYLINUX:
            tags.append(f"{LEGACY_MANYLINUX[minor]}_{arch}")
    return tags


def optional_requirement_files() -> List[Path]:
    """The optional extras' requirements files: every requirements-*.txt but the install sets."""
    return [path for path in sorted(ROOT.glob("requirements-*.txt")) if path.name not in INSTALL_SETS]


def requirements_for(path: Path, python: str) -> List[str]:
    """The requirements in `path` whose markers hold on Python `python`, without their markers.
    pip download evaluates markers for the Python running it, whatever --python-version says."""
    from pip._vendor.packaging.requirements import InvalidRequirement, Requirement  # pip parses them so

    wanted = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        try:
            requirement = Requirement(text)
        except InvalidRequirement as error:
            raise UserError(f"{path.name} line {number} is not a requirement ({error}); fix the file.") from None
        marker = requirement.marker
        if marker is None or marker.evaluate({"python_version": python, "python_full_version": python}):
            wanted.append(f"{requirement.name}{requirement.specifier}")
    return wanted


def build_requirements() -> List[str]:
    """What pip needs to build this checkout's install: pyproject.toml's [build-system] requires
    (read without tomllib, which Python 3.8 to 3.10 lack: the table's one `requires` list)."""
    text = (ROOT / "pyproject.toml").read_text()
    table = text.split("[build-system]", 1)[1].split("\n[", 1)[0]
    listed = re.search(r"^requires\s*=\s*\[([^\]]*)\]", table, re.MULTILINE)
    if listed is None:
        raise UserError(f"{ROOT / 'pyproject.toml'} names no build requirements ([build-system] requires); restore "
                        "the file.")
    return re.findall(r'"([^"]+)"', listed.group(1))


def download_wheels(requirements: List[str], python: str, tag: str, folder: Path) -> List[str]:
    """pip download the wheels of `requirements` into `folder`; returns name==version per wheel."""
    folder.mkdir()
    if requirements:
        platforms = [argument for accepted in accepted_platforms(tag) for argument in ("--platform", accepted)]
        done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                               "--disable-pip-version-check", "--python-version", python, *platforms,
                               "-d", str(folder), *requirements], capture_output=True, text=True)
        if done.returncode != 0:
            said = [line for line in (done.stderr + done.stdout).splitlines() if line.strip()]
            reason = next((line for line in reversed(said) if line.startswith("ERROR")), said[-1] if said else "")
            raise UserError(f"pip could not download {', '.join(requirements)} for Python {python} on {tag} "
                            f"({reason.strip()}); check the network and pip's index settings.")
    return [f"{wheel.name.split('-')[0]}=={wheel.name.split('-')[1]}" for wheel in sorted(folder.glob("*.whl"))]


def hex_digest(path: Path, algorithm: str) -> str:
    """The file's digest by hashlib's `algorithm`: md5 for CIFAR-10's archive, sha256 for the manifest."""
    digest = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def received(url: str, timeout_s: float) -> Iterator[bytes]:
    """The body of `url`, chunk by chunk; a network that fails, or is silent for `timeout_s` (a
    node without one), is a UserError. Writing the chunks is the caller's: its errors are not
    the network's."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            yield from iter(lambda: response.read(CHUNK), b"")
    except (OSError, http.client.HTTPException) as error:  # URLError, HTTPError, a timeout, a cut transfer
        raise UserError(f"could not download CIFAR-10 from {url} ({getattr(error, 'reason', error)}); where there "
                        "is no network, download it elsewhere and give it as --cifar10 PATH.") from None


def download_archive(url: str, path: Path, timeout_s: float) -> None:
    print(f"downloading {url} ...", flush=True)
    with open(path, "wb") as f:
        for chunk in received(url, timeout_s):
            f.write(chunk)


def unpack_cifar10(archive: Path, folder: Path) -> None:
    """Extract from the archive the files main.py reads, and nothing else, into `folder`."""
    from utils.data import cifar10

    folder.mkdir()
    names = [name for name, _ in cifar10.TRAIN_FILES + cifar10.TEST_FILES + [cifar10.META_FILE]]
    try:
        with tarfile.open(archive, "r:gz") as tar:
            for name in names:
                member = tar.getmember(f"{cifar10.FOLDER}/{name}")
                source = tar.extractfile(member) if member.isfile() else None
                if source is None:
                    raise KeyError(f"{cifar10.FOLDER}/{name} is not a file")
                with source, open(folder / name, "wb") as f:
                    shutil.copyfileobj(source, f, CHUNK)
    except (tarfile.TarError, KeyError, EOFError, zlib.error, gzip.BadGzipFile) as error:
        reason = error.args[0] if isinstance(error, KeyError) else error  # str() of a KeyError quotes it
        raise UserError(f"{archive} is not a readable CIFAR-10 archive ({reason}); download it again.") from None


def cifar10_into(folder: Path, archive: Optional[str]) -> Dict[str, object]:
    """CIFAR-10 unpacked into `folder`/cifar-10-batches-py, from `archive` or the official URL,
    refused unless its md5 is the official one; returns where it came from."""
    from utils.data import cifar10

    source = cifar10.URL if archive is None else os.path.abspath(archive)
    path = folder / cifar10.ARCHIVE if archive is None else Path(source)
    folder.mkdir()
    if archive is None:
        download_archive(cifar10.URL, path, cifar10.DOWNLOAD_TIMEOUT_S)
    md5 = hex_digest(path, "md5")
    if md5 != cifar10.ARCHIVE_MD5:
        raise UserError(f"{source} is not the official CIFAR-10 archive: its md5 is {md5}, not "
                        f"{cifar10.ARCHIVE_MD5}; download it again.")
    unpack_cifar10(path, folder / cifar10.FOLDER)
    if archive is None:
        path.unlink()  # unpacked: main.py reads the batch files
    return {"source": source, "archive_md5": md5, "folder": f"{DATA}/{cifar10.FOLDER}"}


def node_command(folder: Path, extras: List[str], budget: int) -> str:
    """What to run on the node: install the bundled extras and this checkout (editable, built by
    the bundled backend) offline, leaving torch and all else the container has as it is, then the
    GPU suite on the bundled CIFAR-10."""
    install = ["python", "-m", "pip", "install", "--no-index", "--find-links", str(folder / WHEELS), "--no-deps",
               *extras, "-e", str(ROOT)]
    suite = ["python", str(ROOT / "benchmarks" / "gpu_suite.py"), "--budget", str(budget),
             "--data-dir", str(folder / DATA)]
    return " && ".join(shlex.join(words) for words in (install, suite))


def prepare(folder: Path) -> None:
    """Refuse a DIR that cannot be written or holds what no bundle writes; make it."""
    ensure_folder_writable(str(folder), "DIR")
    if folder.is_dir():
        foreign = sorted(entry.name for entry in folder.iterdir()
                         if entry.name not in (MANIFEST, WHEELS, DATA) and not entry.name.startswith(STAGING))
        if foreign:
            raise UserError(f"{folder} holds {foreign[0]}, which no bundle writes; give a new or empty folder, "
                            "or one bundle.py wrote.")
    folder.mkdir(parents=True, exist_ok=True)


def tidy(folder: Path) -> None:
    """Finish what a killed bundle.py left in `folder`: an earlier bundle it had set aside goes
    back (restore()), and its hidden folders go (remove())."""
    for leftover in folder.glob(STAGING + "*"):
        if leftover.name.startswith(RETIRED):
            restore(folder, leftover)
        else:
            remove(leftover, "what a killed bundle.py left")


class Manifest(TypedDict):
    """manifest.json: what a bundle holds, for which Python and platform, and the node's command."""
    bundle: int
    created_utc: str
    python: str
    platform: str
    optional_requirements: Dict[str, List[str]]
    wheels: List[str]
    cifar10: Dict[str, object]
    files: Dict[str, str]
    command: str


def build(staging: Path, folder: Path, options: argparse.Namespace, python: str, tag: str) -> Manifest:
    """Fill `staging` with the wheels and the data; returns the manifest that describes them once
    they are moved into `folder`."""
    wanted = {path.name: requirements_for(path, python) for path in optional_requirement_files()}
    backend = build_requirements()
    pins = download_wheels([need for needs in wanted.values() for need in needs] + backend, python, tag,
                           staging / WHEELS)
    built_by = {re.split(r"[=<>!~ ;\[]", need)[0].lower() for need in backend}
    extras = [pin for pin in pins if pin.split("==")[0].lower() not in built_by]  # the backend only builds
    cifar10 = cifar10_into(staging / DATA, options.cifar10)
    files = {path.relative_to(staging).as_posix(): hex_digest(path, "sha256")
             for path in sorted(staging.rglob("*")) if path.is_file()}
    return Manifest(bundle=1, created_utc=now_utc(), python=python, platform=tag, optional_requirements=wanted,
                    wheels=pins, cifar10=cifar10, files=files, command=node_command(folder, extras, options.budget))


def publish(staging: Path, folder: Path) -> None:
    """Swap the bundle built in `staging` (its manifest.json last written) into `folder`: the
    earlier bundle's entries move aside into a hidden folder, manifest.json first, then the new
    ones move in by rename, manifest.json last; a failure on the way puts the earlier bundle
    back (restore()), and a kill leaves it for the next run's tidy(). The earlier bundle is
    removed only once the new one is whole."""
    retired = Path(tempfile.mkdtemp(prefix=RETIRED, dir=folder))
    try:
        for name in (MANIFEST, WHEELS, DATA):
            if os.path.lexists(folder / name):
                os.replace(folder / name, retired / name)
        for name in (WHEELS, DATA, MANIFEST):
            os.replace(staging / name, folder / name)
    except BaseException:
        restore(folder, retired)
        raise
    remove(retired, "the earlier bundle, set aside for this one")


def restore(folder: Path, retired: Path) -> None:
    """Put back the bundle that publish() set aside in `retired`, unless the new one is whole
    in `folder` (its manifest.json moved in last); then remove `retired`."""
    if not (folder / MANIFEST).exists() and (retired / MANIFEST).exists():
        for name in (WHEELS, DATA, MANIFEST):
            if os.path.lexists(retired / name):
                shutil.rmtree(folder / name, ignore_errors=True)  # the new bundle's, moved in before the failure
                os.replace(retired / name, folder / name)
    remove(retired, "an earlier bundle, set aside")


def remove(hidden: Path, what: str) -> None:
    """Remove a hidden folder of bundle.py's, or say on stderr that `what` stays in it, why, and
    how to remove it: a bundle's wheels and data are not left behind unseen."""
    failures: List[Tuple[str, BaseException]] = []

    def failed(function: object, path: str, error: Any) -> None:  # all that can go goes; the first failure is said
        failures.append((path, error if isinstance(error, BaseException) else error[1]))
    if sys.version_info >= (3, 12):  # onerror is deprecated there
        shutil.rmtree(hidden, onexc=failed)
    else:
        shutil.rmtree(hidden, onerror=failed)
    if not os.path.lexists(hidden) or not failures:
        return
    path, error = failures[0]
    why = getattr(error, "strerror", None) or error
    print(f"bundle.py: warning: could not remove {hidden}, which holds {what} ({why}: {path}); remove it yourself "
          f"once you can: rm -rf {shlex.quote(str(hidden))}", file=sys.stderr, flush=True)


def run(options: argparse.Namespace) -> Manifest:
    python = target_python(options.python)
    tag = options.platform or running_platform()
    compat.check_versions()  # the CIFAR-10 URL and md5 are torchvision's
    if options.cifar10 is not None and not os.path.isfile(options.cifar10):
        raise UserError(f"--cifar10 {options.cifar10} is not a file; give the path of cifar-10-python.tar.gz.")
    folder = Path(os.path.abspath(options.dir))
    created = not os.path.lexists(folder)
    prepare(folder)
    busy = f"another bundle.py is writing {folder} now; wait for it to end, or give another DIR."
    with held_or_refused(str(folder), busy):
        staging = None
        try:
            tidy(folder)
            staging = Path(tempfile.mkdtemp(prefix=STAGING, dir=folder))
            manifest = build(staging, folder, options, python, tag)
            (staging / MANIFEST).write_text(json.dumps(manifest, indent=2, allow_nan=False) + "\n")  # holds no float
            publish(staging, folder)
        except OSError as error:
            raise WriteFailed(f"could not write into {folder} ({error.strerror or error}); the bundle there "
                              "before, if any, is kept as it was.") from None
        finally:
            if staging is not None:
                remove(staging, "this run's unfinished build")
            if created and not (folder / MANIFEST).exists():
                shutil.rmtree(folder, ignore_errors=True)  # a failed bundle leaves no folder it made
    return manifest


def main(argv: Optional[List[str]] = None) -> int:
    options = parse(argv)
    try:
        manifest = run(options)
    except (UserError, WriteFailed) as error:
        return console.refused("bundle.py", error)
    print(f"bundle for Python {manifest['python']} on {manifest['platform']} written to "
          f"{os.path.abspath(options.dir)}: {', '.join(manifest['wheels']) or 'no wheels'}, CIFAR-10.\n"
          f"On the node:\n  {manifest['command']}")
    return 0


command = console.program("bundle.py", main)  # the installed `ampbench-bundle`

if __name__ == "__main__":
    sys.exit(command())
