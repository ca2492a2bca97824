import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from deepselect.distributions import make
from deepselect.keys import from_keys, key_bits, to_keys

DTYPES = [torch.bfloat16, torch.float16, torch.float32, torch.float64]
SPECIALS = [-math.inf, -3.5, -1e-40, -0.0, 0.0, 1e-40, 1e-8, 2.0, 65504.0, math.inf]


def _value_order_key(v: float) -> tuple:
    """Reference order: NaN above everything, -0 == +0."""
    return (1, 0.0) if math.isnan(v) else (0, v + 0.0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["bits_positive", "bits_negative", "normal", "nan_hotspots"])
def test_keys_preserve_order(dtype, kind):
    x = make(kind, 1, 3000, dtype, seed=3).flatten()
    x = torch.cat([x, torch.tensor(SPECIALS + [math.nan], dtype=torch.float64).to(dtype)])
    keys = to_keys(x)
    vals = x.double().tolist()
    order = sorted(range(len(vals)), key=lambda i: _value_order_key(vals[i]))
    ks = keys[order]
    assert bool((ks[1:] >= ks[:-1]).all())
    # strictness: equal keys only for equal values (NaN == NaN, -0 == +0)
    for a, b in zip(order[:-1], order[1:], strict=True):
        if keys[a] == keys[b]:
            assert _value_order_key(vals[a]) == _value_order_key(vals[b])


@pytest.mark.parametrize("dtype", DTYPES)
def test_largest_false_mirrors_with_nan_last(dtype):
    x = torch.tensor([-math.inf, -1.0, 0.0, 1.0, math.inf, math.nan], dtype=dtype)
    k = to_keys(x, largest=False)
    # smallest value -> largest key; NaN -> the very bottom
    assert k.tolist() == sorted(k.tolist(), reverse=True)
    assert int(k[-1]) == int(k.min())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("largest", [True, False])
def test_round_trip(dtype, largest):
    x = torch.cat(
        [
            make("bits_positive", 1, 2000, dtype, seed=1),
            make("bits_negative", 1, 2000, dtype, seed=2),
        ],
        1,
    )[0]
    back = from_keys(to_keys(x, largest), dtype, largest)
    nan = torch.isnan(x)
    assert bool(torch.isnan(back[nan]).all())
    same = ~nan
    # -0.0 comes back as +0.0; everything else bit-exact
    xb = torch.where(x == 0, torch.zeros_like(x), x)
    w = key_bits(dtype)
    it = {16: torch.int16, 32: torch.int32, 64: torch.int64}[w]
    assert torch.equal(back[same].view(it), xb[same].view(it))


@pytest.mark.parametrize("dtype", DTYPES)
def test_key_range(dtype):
    x = make("bits_negative", 1, 500, dtype)[0]
    k = to_keys(x)
    if key_bits(dtype) < 64:
        assert int(k.min()) >= 0 and int(k.max()) <= (1 << key_bits(dtype)) - 1


@settings(max_examples=200, deadline=None)
@given(st.floats(allow_nan=True, width=32), st.floats(allow_nan=True, width=32))
def test_pairwise_order_fp32(a, b):
    ka, kb = to_keys(torch.tensor([a, b], dtype=torch.float32)).tolist()
    ra, rb = _value_order_key(a), _value_order_key(b)
    assert (ka < kb) == (ra < rb) and (ka == kb) == (ra == rb)


def test_bad_dtype():
    with pytest.raises(TypeError, match="dtype"):
        to_keys(torch.tensor([1, 2]))
