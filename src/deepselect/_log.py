"""The package's logger, and the one debug line that says which path ran a call.

deepselect logs to ``logging.getLogger("deepselect")`` and configures no handler (a
library leaves that to the application). To see which backend and launch every call
takes::

    import logging
    logging.basicConfig()
    logging.getLogger("deepselect").setLevel(logging.DEBUG)

Each call then logs one line such as
``DEBUG:deepselect:cpu float32 [16, 1048576] k=512 order=none: segments=1 threads=2``.
Off (the default), a call pays one ``isEnabledFor`` check and nothing else: the line
is only formatted when a handler will print it.

>>> log_launch("cpu", "float32", (16, 1 << 20), 512, segments=1)  # silent: DEBUG is off
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

logger = logging.getLogger("deepselect")


def format_launch(
    path: str, dtype: object, shape: Sequence[int], k: int, order: object = None, **launch
) -> str:
    """The text of :func:`log_launch`'s line.

    >>> format_launch("triton-stream", "torch.bfloat16", (4096, 1 << 20), 512, "none",
    ...               grid=264, B=4096)
    'triton-stream bfloat16 [4096, 1048576] k=512 order=none: grid=264 B=4096'
    """
    name = str(dtype).removeprefix("torch.")
    dims = ", ".join(str(int(d)) for d in shape)
    text = f"{path} {name} [{dims}] k={k}"
    if order is not None:
        text += f" order={getattr(order, 'value', order)}"
    if launch:
        text += ": " + " ".join(f"{key}={value}" for key, value in launch.items())
    return text


def log_launch(
    path: str, dtype: object, shape: Sequence[int], k: int, order: object = None, **launch
) -> None:
    """Log, at DEBUG level, the path a call takes and its launch.

    Args:
        path: the code path, e.g. ``"cpu"``, ``"oracle"``, ``"triton-short"``,
            ``"triton-stream"``.
        dtype: the input's dtype (a ``torch.dtype`` or its name).
        shape: ``(rows, N)`` of the input.
        k: elements per row.
        order: the output order (an :class:`~deepselect.options.Order` or a string).
        launch: the launch chosen, as keywords (grid, block sizes, segments, threads);
            a dataclass prints as its repr.
    """
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug("%s", format_launch(path, dtype, shape, k, order, **launch))
