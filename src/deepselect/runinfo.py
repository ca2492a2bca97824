"""What a measurement ran on: package versions, device, threads, commit, date.

``deepselect --version`` prints the versions; ``deepselect bench --csv`` writes every
field into each row, so that rows from different runs stay comparable once pooled.

>>> info = run_info("cpu")
>>> sorted(info) == sorted(FIELDS)
True
"""

from __future__ import annotations

import datetime
import importlib.metadata
import platform
import subprocess
from pathlib import Path

FIELDS = (
    "deepselect_version",
    "torch_version",
    "triton_version",
    "numba_version",
    "python_version",
    "device_name",
    "threads",
    "git_commit",
    "date",
)
"""The keys of :func:`run_info`, in CSV column order."""

_PACKAGE_DIR = Path(__file__).resolve().parent


def package_version(*names: str) -> str:
    """Installed version of the first of ``names`` that is installed, else ``""``
    (read from the package metadata: nothing is imported).

    >>> package_version("no-such-package-here")
    ''
    """
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return ""


def versions() -> dict[str, str]:
    """deepselect's version and those of torch, Triton, Numba and Python."""
    import torch

    from . import __version__

    return {
        "deepselect_version": __version__,
        "torch_version": torch.__version__,
        # nightly CUDA builds of torch ship Triton as pytorch-triton
        "triton_version": package_version("triton", "pytorch-triton"),
        "numba_version": package_version("numba"),
        "python_version": platform.python_version(),
    }


def cpu_name() -> str:
    """The CPU's model name (from /proc/cpuinfo on Linux), else what platform knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def git_commit(path: Path = _PACKAGE_DIR) -> str:
    """Short commit of the checkout this package runs from, ``-dirty`` when tracked
    files differ from it; ``""`` for an installed copy (or without git)."""

    def git(*args: str) -> str:
        r = subprocess.run(
            ["git", "-C", str(path), *args], capture_output=True, text=True, timeout=10
        )
        if r.returncode != 0:
            raise OSError(r.stderr)
        return r.stdout.strip()

    try:
        # only where this very file is tracked: a copy installed into a virtual
        # environment inside some checkout is not that checkout's commit
        git("ls-files", "--error-unmatch", Path(__file__).name)
        commit = git("rev-parse", "--short=12", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return ""
    return commit + ("-dirty" if dirty else "")


def run_info(device: str) -> dict[str, str | int]:
    """Every field of :data:`FIELDS` for a run on ``device`` (``"cuda"`` or ``"cpu"``)."""
    import torch

    if device == "cuda":
        name = torch.cuda.get_device_name()
    else:
        name = cpu_name()
    return {
        **versions(),
        "device_name": name,
        "threads": torch.get_num_threads(),
        "git_commit": git_commit(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def version_line() -> str:
    """``deepselect 0.1.0 (torch ..., triton ..., numba ..., Python ...)``."""
    v = versions()
    parts = [
        f"{name} {v[f'{name}_version'] or 'not installed'}" for name in ("torch", "triton", "numba")
    ]
    return (
        f"deepselect {v['deepselect_version']} ({', '.join(parts)}, Python {v['python_version']})"
    )
