"""Order-preserving unsigned keys for floating-point values.

Every backend compares *keys*, never floats. A key is an unsigned integer of the
value's width (16 bits for bf16/fp16, 32 for fp32, 64 for fp64) such that

* ``a > b`` as values  ⇔  ``key(a) > key(b)`` as unsigned integers,
* every NaN (either sign, any payload) maps to the top key ``2**bits - 1``, so NaN
  counts as larger than ``+inf`` and all NaNs are equal (as in ``torch.topk``),
* ``-0.0`` and ``+0.0`` map to the same key.

Positive values get their sign bit set; negative values have all bits inverted.
For ``largest=False`` the *selection* key is the bitwise complement of the key with
NaNs pinned to 0, so that the k smallest values are the k largest selection keys
and NaNs still come last. Combined with the element index — lower index wins among
equal keys — (key, index) is the strict total order of DESIGN.md.

Keys are returned as ``torch.int64`` tensors (values ``0 .. 2**bits - 1``; for
fp64 the top bit wraps, see :func:`to_keys`) because torch's unsigned types lack
most operations. Works on tensors of any device.
"""

from __future__ import annotations

import torch

# dtype -> (bit width, signed integer dtype of the same width used to view the bits)
_BITS: dict[torch.dtype, tuple[int, torch.dtype]] = {
    torch.bfloat16: (16, torch.int16),
    torch.float16: (16, torch.int16),
    torch.float32: (32, torch.int32),
    torch.float64: (64, torch.int64),
}

SUPPORTED_DTYPES: tuple[torch.dtype, ...] = (torch.bfloat16, torch.float16, torch.float32)
"""Input dtypes of the public GPU API (fp64 keys exist for the CPU backend)."""


def key_bits(dtype: torch.dtype) -> int:
    """Width in bits of the keys of ``dtype`` (16, 32 or 64)."""
    try:
        return _BITS[dtype][0]
    except KeyError:
        raise TypeError(
            f"dtype must be one of bfloat16, float16, float32, float64; got {dtype}"
        ) from None


def to_keys(x: torch.Tensor, largest: bool = True) -> torch.Tensor:
    """Map values to order-preserving selection keys.

    Args:
        x: tensor of bf16 / fp16 / fp32 / fp64, any shape, any device.
        largest: if False, return keys of the mirrored order (k smallest first, NaN
            still last).

    Returns:
        ``torch.int64`` tensor of ``x``'s shape. For 16/32-bit inputs the keys are the
        unsigned keys ``0 .. 2**bits - 1``. For fp64 they are the unsigned 64-bit keys
        reinterpreted as signed (``key - 2**63``), which preserves their order.

    >>> to_keys(torch.tensor([-1.0, -0.0, 0.0, 1.0, float("nan")])).tolist()
    [1082130431, 2147483648, 2147483648, 3212836864, 4294967295]
    """
    bits, itype = _BITS.get(x.dtype, (None, None))
    if bits is None:
        raise TypeError(f"x: dtype must be bf16, fp16, fp32 or fp64; got {x.dtype}")
    # -0.0 -> +0.0 (x + 0.0 would also do it but changes NaN payloads, which we ignore anyway)
    x = torch.where(x == 0, torch.zeros_like(x), x)
    raw = x.contiguous().view(itype).to(torch.int64)
    if bits == 64:
        sign = raw < 0
        # unsigned key u = sign ? ~raw : raw | 2**63 ; stored as u - 2**63 (order kept)
        key = torch.where(sign, ~raw + (-(2**63)), raw)
        top = torch.iinfo(torch.int64).max
        bottom = torch.iinfo(torch.int64).min
    else:
        mask = (1 << bits) - 1
        raw = raw & mask
        sign_bit = 1 << (bits - 1)
        key = torch.where(raw & sign_bit != 0, (~raw) & mask, raw | sign_bit)
        top = mask
        bottom = 0
    nan = torch.isnan(x)
    key = torch.where(nan, torch.full_like(key, top), key)
    if not largest:
        # complement within the width, then pin NaN to the bottom so it comes last
        key = (top + bottom) - key
        key = torch.where(nan, torch.full_like(key, bottom), key)
    return key


def from_keys(keys: torch.Tensor, dtype: torch.dtype, largest: bool = True) -> torch.Tensor:
    """Inverse of :func:`to_keys` up to canonicalisation.

    ``-0.0`` comes back as ``+0.0`` and every NaN as one canonical NaN (the top key's
    bit pattern), since the key mapping merges them.
    """
    bits, itype = _BITS.get(dtype, (None, None))
    if bits is None:
        raise TypeError(f"dtype must be bf16, fp16, fp32 or fp64; got {dtype}")
    keys = keys.to(torch.int64)
    if bits == 64:
        top, bottom = torch.iinfo(torch.int64).max, torch.iinfo(torch.int64).min
        if not largest:
            nan = keys == bottom
            keys = torch.where(nan, torch.full_like(keys, top), (top + bottom) - keys)
        # stored s = u - 2**63: u has its top bit set  <=>  s >= 0, and then raw = s
        raw = torch.where(keys >= 0, keys, ~(keys ^ (-(2**63))))
        return raw.view(torch.float64)
    mask = (1 << bits) - 1
    if not largest:
        nan = keys == 0
        keys = torch.where(nan, torch.full_like(keys, mask), mask - keys)
    sign_bit = 1 << (bits - 1)
    raw = torch.where(keys & sign_bit != 0, keys ^ sign_bit, (~keys) & mask)
    # back to a signed integer of the same width, then reinterpret
    raw = torch.where(raw >= sign_bit, raw - (1 << bits), raw)
    return raw.to(itype).view(dtype)
