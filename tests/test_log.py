"""The package logger's launch line, and the CPU kernels' cache folder and compile notice."""

from __future__ import annotations

import io
import logging
import os
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from deepselect import _numba_cache as nc
from deepselect._log import format_launch, log_launch, logger

SRC = Path(nc.__file__).resolve().parents[1]


def test_logger_is_the_package_logger():
    assert logger is logging.getLogger("deepselect")


def test_launch_line_at_debug_only(caplog):
    with caplog.at_level(logging.INFO, logger="deepselect"):
        log_launch("cpu", "torch.float32", (16, 1 << 20), 512, "none", segments=1)
    assert caplog.records == []
    with caplog.at_level(logging.DEBUG, logger="deepselect"):
        log_launch("cpu", "torch.float32", (16, 1 << 20), 512, "none", segments=1, threads=2)
    assert [r.getMessage() for r in caplog.records] == [
        "cpu float32 [16, 1048576] k=512 order=none: segments=1 threads=2"
    ]
    assert caplog.records[0].levelno == logging.DEBUG and caplog.records[0].name == "deepselect"


def test_launch_line_without_order_or_launch():
    assert format_launch("oracle", "bfloat16", (0, 7), 3) == "oracle bfloat16 [0, 7] k=3"


# ------------------------------------------------------------------- cache folder


def _unwritable_package(tmp_path: Path) -> Path:
    # a file where the package folder should be: its __pycache__ cannot be made, even
    # by root (which permission bits would not stop)
    pkg = tmp_path / "pkg"
    pkg.write_text("")
    return pkg


def test_writable_package_keeps_numbas_default(tmp_path):
    env: dict = {}
    assert nc.prepare_cache(tmp_path, env) is None
    assert env == {} and (tmp_path / "__pycache__").is_dir()


def test_users_cache_dir_is_respected(tmp_path):
    env = {"NUMBA_CACHE_DIR": "/somewhere"}
    assert nc.prepare_cache(_unwritable_package(tmp_path), env) is None
    assert env == {"NUMBA_CACHE_DIR": "/somewhere"}


def test_read_only_package_falls_back_to_the_user_cache(tmp_path):
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    chosen = nc.prepare_cache(_unwritable_package(tmp_path), env)
    assert chosen == str(tmp_path / "xdg" / "deepselect" / "numba")
    assert env["NUMBA_CACHE_DIR"] == chosen and Path(chosen).is_dir()
    assert nc.cache_location(tmp_path / "pkg", env) == chosen


def test_no_home_falls_back_to_a_private_temporary_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    (tmp_path / "xdg").write_text("")  # the user cache cannot be made either
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    chosen = Path(nc.prepare_cache(_unwritable_package(tmp_path), env))
    assert chosen.parent == tmp_path / "tmp" and chosen.name.startswith("deepselect-numba-")
    assert stat.S_IMODE(chosen.stat().st_mode) == 0o700
    # a folder of that name that others can write is never used: a fresh one instead
    os.chmod(chosen, 0o777)
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg")}
    other = Path(nc.prepare_cache(_unwritable_package(tmp_path), env))
    assert other != chosen and other.parent == tmp_path / "tmp"
    assert stat.S_IMODE(other.stat().st_mode) == 0o700


def test_numba_imported_first_still_caches_in_the_chosen_folder(tmp_path):
    """Numba reads NUMBA_CACHE_DIR when it is imported; prepare_cache must make an
    already imported Numba read it again, or the fallback would change nothing."""
    mod = tmp_path / "mod"
    mod.mkdir()
    (mod / "jitted.py").write_text(
        "from numba import njit\n\n@njit(cache=True)\ndef inc(x):\n    return x + 1\n"
    )
    script = textwrap.dedent(
        f"""
        import os, sys
        from pathlib import Path
        import numba  # first, as the CPU backend's modules import it
        from deepselect import _numba_cache as nc
        os.environ.pop("NUMBA_CACHE_DIR", None)
        os.environ["XDG_CACHE_HOME"] = {str(tmp_path / "xdg")!r}
        print(nc.prepare_cache(Path({str(tmp_path / "pkg")!r})))
        sys.path.insert(0, {str(mod)!r})
        import jitted
        assert jitted.inc(1) == 2
        """
    )
    _unwritable_package(tmp_path)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    chosen = Path(r.stdout.strip())
    assert chosen == tmp_path / "xdg" / "deepselect" / "numba"
    assert list(chosen.rglob("*.nbi")), "the index file is not in the chosen folder"
    assert not (mod / "__pycache__").exists() or not list((mod / "__pycache__").glob("*.nbi"))


# ---------------------------------------------------------------- compile notice


def test_notice_on_a_slow_first_call_only(monkeypatch, tmp_path):
    monkeypatch.setattr(nc, "NOTICE_AFTER_S", 0.05)
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    out = io.StringIO()
    key = f"slow-{time.monotonic_ns()}"
    with nc.compiling(key, out):
        time.sleep(0.5)
    assert out.getvalue() == (
        f"deepselect: compiling CPU kernels for {key} once (cached in {tmp_path})\n"
    )
    with nc.compiling(key, out):  # the same key again: never a second line
        time.sleep(0.3)
    assert out.getvalue().count("\n") == 1


def test_no_notice_on_a_fast_first_call(monkeypatch):
    monkeypatch.setattr(nc, "NOTICE_AFTER_S", 0.2)
    out = io.StringIO()
    with nc.compiling(f"fast-{time.monotonic_ns()}", out):
        pass
    time.sleep(0.4)  # past the delay: the cancelled timer stays silent
    assert out.getvalue() == ""


def test_notice_is_off_the_error_path(monkeypatch):
    monkeypatch.setattr(nc, "NOTICE_AFTER_S", 0.1)
    out = io.StringIO()
    with pytest.raises(KeyError), nc.compiling(f"err-{time.monotonic_ns()}", out):
        raise KeyError("boom")
    time.sleep(nc.NOTICE_AFTER_S + 0.2)
    assert out.getvalue() == ""
