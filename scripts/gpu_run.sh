#!/usr/bin/env bash
# One call on a GPU machine: the kernel's phase profile (PROFILE=1), the kernel
# benchmark table (every result checked first; VARIANT=default|other|both compaction
# key search), robustness distributions in full mode (ROBUST="..."), then the GPU
# test suite in parallel shards (scripts/gpu_tests.sh; TESTS= files, default all).
# SHORT=1 adds the few/short-rows table, BENCH=1 `deepselect bench --quick` with plots,
# NCU=1 Nsight Compute's warp-stall reasons for one streaming launch (normal, preset).
# The GPU tests are compile-bound (~5 s per kernel specialisation): on an H200 host
# with 16 cores, 8 shards of ~20 tests each needed more than 200 s.
# Timings run before the tests, on a quiet GPU. Logs go to $OUT (or ./out); the
# short table is printed last.
#   bash scripts/gpu_run.sh [quick|full] [pytest -k expression]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD/src:$PWD/tests PYTHONUNBUFFERED=1 TRITON_DEFAULT_FP_FUSION=1
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/deepselect-triton-cache}
mode=${1:-quick}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/gpu.txt"
if [ "${PROFILE:-0}" = 1 ]; then
  (cd benchmarks && timeout ${PROFILE_TIMEOUT:-150} python3 profile_kernel.py $([ "$mode" = quick ] && echo --quick)) 2>&1 | tee "$OUT/profile.txt"
fi
timeout ${TABLE_TIMEOUT:-240} python3 benchmarks/kernel_table.py $([ "$mode" = quick ] && echo --quick) --variant ${VARIANT:-both} --csv "$OUT/table.csv" 2>&1 | tee "$OUT/table.txt"
if [ "${NCU:-0}" = 1 ]; then  # warp stall reasons of one streaming launch, normal and preset
  for pre in "" --preset; do
    (cd benchmarks && timeout ${NCU_TIMEOUT:-120} ncu --kernel-name regex:deepselect_rows_kernel \
      --launch-skip 1 --launch-count 1 --section WarpStateStats --section SchedulerStats \
      --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy \
      python3 one_call.py $pre) 2>&1 | tee -a "$OUT/ncu.txt" | grep -E "Stall|Warp Cycles|Issued|Eligible|Throughput|Occupancy|Registers" | head -40
  done
fi
if [ "${SHORT:-0}" = 1 ]; then
  (cd benchmarks && timeout ${SHORT_TIMEOUT:-100} python3 short_table.py) 2>&1 | tee "$OUT/short.txt"
fi
if [ "${BENCH:-0}" = 1 ]; then
  timeout ${BENCH_TIMEOUT:-100} python3 -m deepselect bench --quick --csv "$OUT/bench.csv" --plot "$OUT/plots" 2>&1 | tee "$OUT/bench.txt" | tail -30
fi
if [ "$mode" = full ]; then
  for d in ${ROBUST:-shifted tiny ascending distinct32}; do
    timeout 120 python3 benchmarks/kernel_table.py --quick --dist $d 2>&1 | tail -n +2 | tee -a "$OUT/robust.txt"
  done
fi
OUT="$OUT" GPU_TESTS_TIMEOUT=${PYTEST_TIMEOUT:-420} GPU_TESTS_SPLIT=${GPU_TESTS_SPLIT:-functions} GPU_TESTS_K="${2:-}" bash scripts/gpu_tests.sh ${TESTS:-tests} 2>&1 | tee "$OUT/pytest.txt" | tail -15
echo "==== table"; cat "$OUT/table.txt"; [ -f "$OUT/robust.txt" ] && cat "$OUT/robust.txt"
[ -f "$OUT/short.txt" ] && cat "$OUT/short.txt"
