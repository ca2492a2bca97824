#!/usr/bin/env bash
# One call on a GPU machine: FlashInfer installed from wheels, its JIT modules compiled,
# then the indexer's grid and the sampling operations beside it, and the per-call cost.
#   bash scripts/peer_tables.sh [WHEELS_DIR]     (default .whl: an ignored folder)
# FlashInfer compiles its modules on first use into its own install (.site), which a
# fresh machine or a fresh copy of the tree does not keep: install, compile and time in
# the same call. Logs and CSVs in $OUT (default ./out); a short report last.
# Environment: GRID_ARGS, OPS_ARGS (extra `deepselect bench` options, default --quick),
# WARM_TIMEOUT, GRID_TIMEOUT, OPS_TIMEOUT, HOST_TIMEOUT (seconds; GRID_TIMEOUT=0: no
# indexer grid, HOST_TIMEOUT=0: no host table), BESIDE (a command run while FlashInfer compiles; output in beside.txt;
# a light one: the GPU suite beside it, on 16 cores, finished 86 of 436 tests in 290 s, 2026-12-08).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out}
WHEELS=${1:-.whl}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TRITON_DEFAULT_FP_FUSION=1
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/deepselect-triton-cache}
if ls "$WHEELS"/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target .site \
    "$WHEELS"/*.whl >"$OUT/peers.txt" 2>&1 || echo "wheels did not install" >>"$OUT/peers.txt"
fi
export PYTHONPATH=$PWD/.site:$PWD/src${PYTHONPATH:+:$PYTHONPATH}
# compile FlashInfer's top-k and sampling modules once, before anything is timed: the
# two in parallel processes (nvcc takes minutes a module on a fresh machine); $BESIDE,
# if set, runs meanwhile (a command that times nothing against FlashInfer)
warm() { # warm <topk|sampling>
  timeout "${WARM_TIMEOUT:-300}" python3 - "$1" >>"$OUT/peers_$1.txt" 2>&1 <<'PY'
import sys
import time
import torch
t = time.perf_counter()
try:
    import flashinfer
except ImportError as exc:
    raise SystemExit(f"FlashInfer not importable ({exc}): its columns stay empty")
x = torch.randn(4, 16384, device="cuda")
if sys.argv[1] == "topk":
    for t_ in (x, x.bfloat16()):
        flashinfer.top_k(t_, 64, sorted=False)
        flashinfer.top_k(t_, 64, sorted=False, deterministic=True, tie_break=1)
    lengths = torch.full((4,), 16384, dtype=torch.int32, device="cuda")
    offsets = torch.zeros(4, dtype=torch.int32, device="cuda")
    try:
        flashinfer.top_k_ragged_transform(x, offsets, lengths, 64)
    except Exception as exc:  # the grid says so in its footnote
        print("top_k_ragged_transform:", exc)
else:
    p = torch.softmax(x, 1)
    flashinfer.sampling.top_k_mask_logits(x, 50)
    flashinfer.sampling.top_k_renorm_probs(p, 50)
    flashinfer.sampling.top_k_sampling_from_probs(p, 50)
torch.cuda.synchronize()
print(f"FlashInfer {flashinfer.__version__} {sys.argv[1]}: compiled in "
      f"{time.perf_counter() - t:.0f} s")
PY
  echo "warm $1 rc=$?" >>"$OUT/peers_$1.txt"
}
warm topk &
w1=$!
warm sampling &
w2=$!
if [ -n "${BESIDE:-}" ]; then
  bash -c "$BESIDE" >"$OUT/beside.txt" 2>&1
  echo "beside rc=$?" >>"$OUT/peers.txt"
fi
wait "$w1" "$w2"
cat "$OUT"/peers_topk.txt "$OUT"/peers_sampling.txt >>"$OUT/peers.txt"
rm -f "$OUT"/peers_topk.txt "$OUT"/peers_sampling.txt
if [ "${GRID_TIMEOUT:-150}" != 0 ]; then
  timeout "${GRID_TIMEOUT:-150}" python3 -m deepselect bench --scenario indexer-grid --graph \
    ${GRID_ARGS:---quick} --csv "$OUT/grid.csv" >"$OUT/grid.txt" 2>&1
  echo "grid rc=$?" >>"$OUT/peers.txt"
fi
timeout "${OPS_TIMEOUT:-120}" python3 -m deepselect bench --scenario sampling-ops \
  ${OPS_ARGS:---quick} --csv "$OUT/ops.csv" >"$OUT/ops.txt" 2>&1
echo "ops rc=$?" >>"$OUT/peers.txt"
if [ "${HOST_TIMEOUT:-70}" != 0 ]; then
  timeout "${HOST_TIMEOUT:-70}" python3 benchmarks/host_table.py --import-runs 2 --calls 1000 \
    >"$OUT/host.txt" 2>&1
  echo "host rc=$?" >>"$OUT/peers.txt"
fi
cat "$OUT/peers.txt"
[ -f "$OUT/host.txt" ] && tail -n 14 "$OUT/host.txt"
tail -n 40 "$OUT/ops.txt"
[ -f "$OUT/grid.txt" ] && tail -n 45 "$OUT/grid.txt"
