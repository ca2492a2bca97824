"""deepselect.launch_cache: a repeated launch calls the compiled kernel's launcher
with the bound arguments, and anything Triton specializes on reaches a launch of
its own (checked with a stand-in for a JIT function; on the CPU the real one is
Triton's interpreter, which always takes Triton's own path)."""

import inspect
from types import SimpleNamespace

import pytest
import torch
import triton
import triton.language as tl

from deepselect import launch_cache


class _Param:
    def __init__(self, name, default=inspect.Parameter.empty):
        self.name = name
        self.default = default


class _FakeKernel:
    function = 1234
    packed_metadata = ("meta",)

    def __init__(self, log):
        self.log = log

    def run(self, *a):
        self.log.append(("fast", a))


class _FakeJit:
    """The parts of a JITFunction the cache uses: params, and ``fn[grid](...)`` that
    launches and returns the compiled kernel."""

    def __init__(self):
        self.params = [_Param("x"), _Param("n"), _Param("B"), _Param("FLAG", False)]
        self.log = []
        self.compiled = 0

    def __getitem__(self, grid):
        def run(*args, **kwargs):
            self.compiled += 1
            self.log.append(("slow", grid, args, kwargs))
            return _FakeKernel(self.log)

        return run


@pytest.fixture
def fake_driver(monkeypatch):
    runtime = SimpleNamespace(
        launch_enter_hook=SimpleNamespace(calls=[]), launch_exit_hook=SimpleNamespace(calls=[])
    )
    monkeypatch.setattr(launch_cache, "_driver", lambda: (lambda: 0, lambda dev: 77, runtime))
    launch_cache.clear()
    yield runtime
    launch_cache.clear()


def test_second_launch_binds_once(fake_driver):
    fn = _FakeJit()
    x = torch.empty(64)
    launch_cache.launch(fn, (3,), (x, 10), {"B": 128, "num_warps": 4}, key=("k", 10))
    launch_cache.launch(fn, (3,), (x, 10), {"B": 128, "num_warps": 4}, key=("k", 10))
    assert fn.compiled == 1
    kind, a = fn.log[-1]
    assert kind == "fast"
    # grid padded to 3, the stream, the kernel's handles, no metadata or hooks, then
    # every parameter in order: positional, keyword, default (launch options left out)
    assert a[:9] == (3, 1, 1, 77, 1234, ("meta",), None, None, None)
    assert a[9:] == (x, 10, 128, False)


def test_alignment_grid_and_key_reach_their_own_launch(fake_driver):
    fn = _FakeJit()
    buf = torch.empty(64)
    kw = {"B": 128}
    launch_cache.launch(fn, (3,), (buf, 10), kw, key=1)
    launch_cache.launch(fn, (3,), (buf[1:], 10), kw, key=1)  # 4 bytes off: not 16-aligned
    launch_cache.launch(fn, (4,), (buf, 10), kw, key=1)
    launch_cache.launch(fn, (3,), (buf, 11), kw, key=2)
    assert fn.compiled == 4
    launch_cache.launch(fn, (3,), (buf[4:], 10), kw, key=1)  # 16 bytes off: aligned again
    assert fn.compiled == 4 and fn.log[-1][0] == "fast"


def test_hooks_and_unbindable_launches_take_tritons_path(fake_driver):
    fn = _FakeJit()
    x = torch.empty(8)
    fake_driver.launch_enter_hook.calls.append(print)  # a profiler's hook
    for _ in range(2):
        launch_cache.launch(fn, (1,), (x, 1), {"B": 8}, key=0)
    assert [e[0] for e in fn.log] == ["slow", "slow"]
    fake_driver.launch_enter_hook.calls.clear()
    fn.log.clear()
    for _ in range(2):  # a tensor among the keywords cannot be fixed by the key
        launch_cache.launch(fn, (1,), (x,), {"n": 1, "B": x}, key=0)
    assert [e[0] for e in fn.log] == ["slow", "slow"]
    fn.log.clear()
    for _ in range(2):  # B neither given nor defaulted
        launch_cache.launch(fn, (1,), (x, 1), {}, key=5)
    assert [e[0] for e in fn.log] == ["slow", "slow"]


@triton.jit
def _add_one(ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(ptr + offs, tl.load(ptr + offs, mask=m) + 1, mask=m)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the interpreter's path")
def test_interpreter_runs_every_launch():
    launch_cache.clear()
    x = torch.zeros(100)
    for _ in range(3):
        launch_cache.launch(_add_one, (4,), (x, 100), {"BLOCK": 32}, key=100)
    assert torch.equal(x, torch.full((100,), 3.0))


@pytest.mark.gpu
def test_compiled_kernel_runs_every_launch():
    launch_cache.clear()
    x = torch.zeros(100, device="cuda")
    for _ in range(3):
        launch_cache.launch(_add_one, (4,), (x, 100), {"BLOCK": 32}, key=100)
    y = torch.zeros(101, device="cuda")[1:]  # misaligned: a launch of its own
    for _ in range(2):
        launch_cache.launch(_add_one, (4,), (y, 100), {"BLOCK": 32}, key=100)
    assert torch.equal(x.cpu(), torch.full((100,), 3.0))
    assert torch.equal(y.cpu(), torch.full((100,), 2.0))


def test_derived_key_tells_arguments_apart(fake_driver):
    """Without a key, integers by value, tensors by dtype and alignment, tuples by
    their elements and other values by type and value make one: a repeated call with
    new tensors of the same kind takes the bound launch with its own arguments."""
    fn = _FakeJit()
    x, y = torch.empty(8), torch.empty(8, dtype=torch.int32)
    cases = [
        ((x, 10), {"B": 8}),
        ((x, 11), {"B": 8}),
        ((x, 1), {"B": 8}),
        ((x, True), {"B": 8}),  # True == 1, but a bool is another kernel
        ((x, 1.0), {"B": 8}),
        ((x, (10, x)), {"B": 8}),
        ((x, (10, y)), {"B": 8}),
        ((x, (10, x[1:])), {"B": 8}),  # not 16-byte aligned, inside a tuple
        ((y, 10), {"B": 8}),
        ((x[1:], 10), {"B": 8}),
        ((x, 10), {"B": 16}),
        ((x, 10), {"B": 8, "FLAG": True}),
    ]
    for args, kw in cases:
        launch_cache.launch(fn, (1,), args, kw)
        launch_cache.launch(fn, (1,), args, kw)
        assert fn.log[-2][0] == "slow" and fn.log[-1][0] == "fast", (args, kw)
        assert fn.log[-1][1][9:11] == args
    assert fn.compiled == len(cases)
    launch_cache.launch(fn, (1,), (x, 2.5), {"B": 8})  # any float: the same kernel
    assert fn.log[-1][0] == "fast" and fn.log[-1][1][10] == 2.5
    z = torch.empty(8)  # another tensor of x's kind, inside a tuple
    launch_cache.launch(fn, (1,), (z, (10, z)), {"B": 8})
    assert fn.log[-1][0] == "fast" and fn.log[-1][1][9] is z and fn.log[-1][1][10][1] is z
    assert fn.compiled == len(cases)
    for _ in range(2):  # unhashable: Triton's path every time
        launch_cache.launch(fn, (1,), (x, 10), {"B": [8]})
    assert fn.compiled == len(cases) + 2


def test_switched_off_takes_tritons_path(fake_driver, monkeypatch):
    monkeypatch.setattr(launch_cache, "ENABLED", False)
    fn = _FakeJit()
    x = torch.empty(8)
    for _ in range(2):
        launch_cache.launch(fn, (1,), (x, 10), {"B": 8})
    assert [e[0] for e in fn.log] == ["slow", "slow"]


def test_cached_wrapper_launches_through_the_cache(fake_driver):
    fn = _FakeJit()
    fn.name = "fake"
    wrapped = launch_cache.cached(fn)
    x = torch.empty(8)
    for _ in range(3):
        wrapped[(2,)](x, 10, B=8)
    assert fn.compiled == 1 and [e[0] for e in fn.log] == ["slow", "fast", "fast"]
    assert wrapped.name == "fake" and wrapped.params is fn.params


def test_held_call_passes_new_addresses(fake_driver):
    """A recorded call (two launches: a scratch buffer, one zeroed, views at offsets,
    a tuple argument) repeated on new tensors: each launcher gets the new tensors'
    and fresh buffers' addresses as ints at the recorded offsets, every other argument
    as recorded; a new input of another 16-byte alignment launches nothing."""
    fn, fn2 = _FakeJit(), _FakeJit()
    x, out = torch.empty(64), torch.empty(8, dtype=torch.int32)

    def call(x, out):
        s = launch_cache.scratch((4, 16), torch.int32, x.device)
        z = launch_cache.scratch(32, torch.int64, x.device, zero=True)
        launch_cache.launch(fn, (3,), (x[8:], (s, 5)), {"B": 64})
        launch_cache.launch(fn2, (2, 2), (out, (7, z[4:])), {"B": 1})

    with launch_cache.recording() as rec:
        call(x, out)
    replay = launch_cache.held(rec, (x, out))
    assert replay is not None
    fn.log.clear(), fn2.log.clear()
    y, o = torch.empty(64), torch.empty(8, dtype=torch.int32)
    assert replay(y, o) is True
    (k1, a1), (k2, a2) = fn.log + fn2.log
    assert k1 == k2 == "fast"
    assert a1[:9] == (3, 1, 1, 77, 1234, ("meta",), None, None, None)
    assert a1[9] == y.data_ptr() + 32 and type(a1[9]) is int
    scratch_base = a1[10][0]  # the uninitialised buffer: one allocation, 16-byte aligned
    assert scratch_base % 16 == 0 and a1[10][1] == 5 and a1[11:] == (64, False)
    assert a2[:4] == (2, 2, 1, 77) and a2[9] == o.data_ptr() and a2[10][0] == 7
    zeroed = a2[10][1] - 32  # z[4:] of the zeroed buffer
    assert zeroed % 16 == 0 and zeroed != scratch_base and a2[11:] == (1, False)
    fn.log.clear(), fn2.log.clear()
    assert replay(torch.empty(65)[1:], o) is False and fn.log == fn2.log == []
    # a launch that cannot be repeated, or a tensor argument of unknown origin
    with launch_cache.recording() as rec:
        launch_cache.launch(fn, (1,), (x,), {"n": 1, "B": x})
    assert launch_cache.held(rec, (x,)) is None
    with launch_cache.recording() as rec:
        launch_cache.launch(fn, (1,), (torch.empty(4), 1), {"B": 8})
    assert launch_cache.held(rec, (x,)) is None
    fake_driver.launch_enter_hook.calls.append(print)  # a profiler's hook
    fn.log.clear()
    assert replay(y, o) is False and fn.log == []
