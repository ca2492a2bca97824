"""Where the CPU backend's compiled kernels are cached, and a notice while they compile.

Numba compiles the CPU backend the first time a process calls it in a fresh
environment (tens of seconds per dtype family on a small machine) and caches the
machine code on disk, so that later processes load it in well under a second. Numba
caches beside the source (the package's ``__pycache__``), else in a user-wide
directory, else it refuses: ``RuntimeError: cannot cache function ...: no locator
available`` (a read-only install whose user has no writable home).

* :func:`prepare_cache` runs before the kernels are defined. Where ``NUMBA_CACHE_DIR``
  is unset and the package's ``__pycache__`` is not writable, it points
  ``NUMBA_CACHE_DIR`` at the first writable of ``$XDG_CACHE_HOME/deepselect/numba``
  (``~/.cache/deepselect/numba``) and a private folder in the temporary directory.
* :func:`compiling` wraps a call that may compile: the first time per key (a dtype),
  if the call is still running after :data:`NOTICE_AFTER_S`, it prints one line on
  stderr, ``deepselect: compiling CPU kernels for float32 once (cached in ...)``. A
  call that loads the cache returns before then and prints nothing.

Both are documented for users in ``docs/environment.md``.
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from ._log import logger

PACKAGE_DIR = Path(__file__).resolve().parent

NOTICE_AFTER_S = 3.0
"""Seconds a first call may take before the notice is printed: compiling the fp32
kernels took 34 s on a busy 2-core machine (bf16 24 s more), loading them from the
cache there 1.2 s."""

_seen: set = set()


def _writable(path: Path) -> bool:
    """Whether ``path`` exists or can be made, and a file can be created in it (the
    test Numba applies to a cache directory)."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
    except OSError:
        return False
    return True


def _private_dir(path: Path) -> bool:
    """Make ``path`` (mode 0700) or accept it if it is already a directory of ours that
    nobody else can write: a shared temporary directory could hold another user's
    folder of that name, and Numba's cache files are loaded as code."""
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        st = path.lstat()
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode) or st.st_mode & 0o022:
        return False
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return False
    return _writable(path)


def fallback_dirs(environ: dict | None = None) -> list[tuple[Path, bool]]:
    """Candidate cache folders, best first, for when the package's own is read-only:
    ``(folder, shared)``, where ``shared`` marks one in the temporary directory that
    must be private to this user.

    >>> [(str(p), shared) for p, shared in fallback_dirs({"XDG_CACHE_HOME": "/c"})][0]
    ('/c/deepselect/numba', False)
    """
    env = os.environ if environ is None else environ
    dirs = []
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    if os.path.isabs(base):  # expanduser leaves "~" as it is when there is no home
        dirs.append((Path(base) / "deepselect" / "numba", False))
    user = os.getuid() if hasattr(os, "getuid") else env.get("USERNAME", "user")
    dirs.append((Path(tempfile.gettempdir()) / f"deepselect-numba-{user}", True))
    return dirs


def prepare_cache(package_dir: Path = PACKAGE_DIR, environ: dict | None = None) -> str | None:
    """Make sure Numba can cache the CPU kernels; call before they are defined.

    Leaves everything as it is when ``NUMBA_CACHE_DIR`` is set or the package's
    ``__pycache__`` is writable. Otherwise sets ``NUMBA_CACHE_DIR`` (in ``environ``,
    default ``os.environ``) to the first usable of :func:`fallback_dirs`, or to a new
    private temporary folder, and has an already imported Numba read it again.

    Returns:
        The folder it chose, or None when it changed nothing.
    """
    env = os.environ if environ is None else environ
    if env.get("NUMBA_CACHE_DIR") or _writable(package_dir / "__pycache__"):
        return None
    for path, shared in fallback_dirs(env):
        if _private_dir(path) if shared else _writable(path):
            break
    else:
        path = Path(tempfile.mkdtemp(prefix="deepselect-numba-"))
    env["NUMBA_CACHE_DIR"] = str(path)
    if environ is None and "numba" in sys.modules:  # Numba reads its settings at import
        from numba.core import config

        config.reload_config()
    logger.debug("%s is not writable: Numba caches in NUMBA_CACHE_DIR=%s", package_dir, path)
    return str(path)


def cache_location(package_dir: Path = PACKAGE_DIR, environ: dict | None = None) -> str:
    """The folder the CPU kernels are cached in (``NUMBA_CACHE_DIR``, else the
    package's ``__pycache__``).

    >>> cache_location(Path("/pkg"), {"NUMBA_CACHE_DIR": "/tmp/nc"})
    '/tmp/nc'
    >>> cache_location(Path("/pkg"), {})
    '/pkg/__pycache__'
    """
    env = os.environ if environ is None else environ
    return env.get("NUMBA_CACHE_DIR") or str(package_dir / "__pycache__")


def _notice(what: str, stream: TextIO | None) -> None:
    stream = sys.stderr if stream is None else stream
    print(
        f"deepselect: compiling CPU kernels for {what} once (cached in {cache_location()})",
        file=stream,
        flush=True,
    )


@contextmanager
def compiling(key: object, stream: TextIO | None = None) -> Iterator[None]:
    """Around a call that may compile kernels for ``key`` (e.g. the input's dtype):
    the first time this process sees ``key``, print the notice if the call lasts
    longer than :data:`NOTICE_AFTER_S`. Later calls with the same key cost one set
    lookup.

    >>> import io
    >>> out = io.StringIO()
    >>> with compiling("doctest-key", out):
    ...     pass
    >>> out.getvalue()  # fast: nothing compiled, nothing printed
    ''
    """
    if key in _seen:
        yield
        return
    _seen.add(key)
    what = str(key).removeprefix("torch.")
    timer = threading.Timer(NOTICE_AFTER_S, _notice, args=(what, stream))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
