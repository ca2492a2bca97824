#!/usr/bin/env bash
# One call on a GPU machine: the kernel's phase profile (PROFILE=1, PROFILE_ARGS), the kernel
# benchmark table (every result checked first; VARIANT=default|other|both compaction
# key search; TABLE_ARGS more options, e.g. "--only fp32:300:129280:512:value"),
# robustness distributions in full mode or when ROBUST="dist ..." is set (each a
# quick table with ROBUST_VARIANT, else VARIANT), then the GPU
# test suite in parallel shards (scripts/gpu_tests.sh; TESTS= files, default all, or a
# file of test ids ending in .ids, such as an earlier run's unfinished.ids;
# TESTS=none skips them). TABLE=0 skips the table.
# READ=1 the plain-read ceiling (benchmarks/read_ceiling.py, READ_ARGS its options),
# SHORT=1 adds the few/short-rows table (SHORT_ARGS its options; SHORT_DIST="ascending
# distinct32" the same on those rows, SHORT_DIST_ARGS their options), HOST=1 small
# calls' host / eager / graph time, BENCH=1 `deepselect bench --quick` with plots,
# NCU=1 Nsight Compute's warp-stall reasons for one streaming launch (normal, preset;
# NCU_ARGS one_call.py's shape options, e.g. "--rows 4096 --w32"),
# NCU_SOURCE="name:one_call.py args;..." each launch's stall samples per SASS instruction,
# ENGINE=1 benchmarks/engine_bench.py --quick (ENGINE_ARGS="" the full figure),
# SANITIZE=1 compute-sanitizer memcheck / racecheck over scripts/sanitize_cases.py (our
# kernels only: torch's are excluded).
# The GPU tests are compile-bound (~5 s per kernel specialisation): on an H200 host
# with 16 cores, 12 shards of 18-20 tests each took 18 to 406 s (423 s in all), so
# the tests run as a queue of small pieces taken by 12 workers (GPU_TESTS_SPLIT,
# GPU_TESTS_SHARDS override), longest expected first by scripts/gpu_test_costs.txt (the
# seconds per test of an earlier run; this run's come back as test_costs.txt).
# Timings run before the tests, on a quiet GPU. Logs go to $OUT (or ./out); the
# short table is printed last.
#   bash scripts/gpu_run.sh [quick|full] [pytest -k expression]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD/src:$PWD/tests PYTHONUNBUFFERED=1 TRITON_DEFAULT_FP_FUSION=1
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/deepselect-triton-cache}
mode=${1:-quick}
tests_rc=0
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/gpu.txt"
if [ "${PROFILE:-0}" = 1 ]; then
  (cd benchmarks && timeout ${PROFILE_TIMEOUT:-150} python3 profile_kernel.py $([ "$mode" = quick ] && echo --quick) ${PROFILE_ARGS:-}) 2>&1 | tee "$OUT/profile.txt"
fi
if [ "${TABLE:-1}" = 1 ]; then
  timeout ${TABLE_TIMEOUT:-240} python3 benchmarks/kernel_table.py $([ "$mode" = quick ] && echo --quick) --variant ${VARIANT:-both} ${TABLE_ARGS:-} --csv "$OUT/table.csv" 2>&1 | tee "$OUT/table.txt"
fi
if [ "${NCU:-0}" = 1 ]; then  # warp stall reasons of one streaming launch, normal and preset
  for pre in "" --preset ${NCU_EXTRA:-}; do  # NCU_EXTRA="--w32" adds a third launch
    (cd benchmarks && timeout ${NCU_TIMEOUT:-120} ncu --clock-control none --kernel-name regex:deepselect_rows_kernel \
      --launch-skip 1 --launch-count 1 --section WarpStateStats --section SchedulerStats \
      --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy \
      --section SourceCounters --section InstructionStats --section SpeedOfLight \
      --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active \
      python3 one_call.py ${NCU_ARGS:-} $pre) 2>&1 | tee -a "$OUT/ncu.txt" | grep -E "stalled|Warp Cycles|Issued Warp|Eligible Warps|Memory Throughput|DRAM Throughput|L2 Hit|Duration|Executed Ipc" | sort -k3 -g -r | head -30
  done
fi
if [ -n "${NCU_SOURCE:-}" ]; then  # per-SASS-instruction stall samples of one launch each:
  # NCU_SOURCE="name:one_call.py args;..." -> $OUT/src_<name>.csv (ncu's source page);
  # NCU_KERNEL: the kernel's name (regex), short_rows_kernel for one_call.py --short
  IFS=';' read -ra runs <<<"$NCU_SOURCE"
  for r in "${runs[@]}"; do
    name=${r%%:*}; args=${r#*:}
    (cd benchmarks && timeout ${NCU_TIMEOUT:-150} ncu --clock-control none --kernel-name regex:${NCU_KERNEL:-deepselect_rows_kernel} \
      --launch-skip 1 --launch-count 1 --section SourceCounters --section WarpStateStats \
      -f -o "/tmp/src_$name" python3 one_call.py $args) >>"$OUT/ncu_src.log" 2>&1
    ncu --import "/tmp/src_$name.ncu-rep" --page source --csv --print-source sass >"$OUT/src_$name.csv" 2>>"$OUT/ncu_src.log" \
      || ncu --import "/tmp/src_$name.ncu-rep" --page source --csv >"$OUT/src_$name.csv" 2>>"$OUT/ncu_src.log"
    echo "ncu source $name: $(wc -l <"$OUT/src_$name.csv") lines"
  done
fi
if [ "${READ:-0}" = 1 ]; then  # the plain-read ceiling (benchmarks/read_ceiling.py, READ_ARGS)
  (cd benchmarks && timeout ${READ_TIMEOUT:-200} python3 read_ceiling.py ${READ_ARGS:-}) 2>&1 | tee "$OUT/read.txt"
fi
if [ "${SHORT:-0}" = 1 ]; then
  (cd benchmarks && timeout ${SHORT_TIMEOUT:-100} python3 short_table.py ${SHORT_ARGS:-}) 2>&1 | tee "$OUT/short.txt"
  for d in ${SHORT_DIST:-}; do  # SHORT_DIST="ascending ...": the same table on those rows
    (cd benchmarks && timeout ${SHORT_TIMEOUT:-100} python3 short_table.py --dist $d ${SHORT_DIST_ARGS:-${SHORT_ARGS:-}}) 2>&1 | tail -n +2 | sed "s/^/$d /" | tee -a "$OUT/short.txt"
  done
fi
if [ "${HOST:-0}" = 1 ]; then  # host / eager / graph-replay time of small calls
  (cd benchmarks && timeout ${HOST_TIMEOUT:-150} python3 host_table.py ${HOST_ARGS:-}) 2>&1 | tee "$OUT/host.txt" | tail -14
fi
if [ "${ENGINE:-0}" = 1 ]; then  # engine operations beside plain torch (issue figures)
  timeout ${ENGINE_TIMEOUT:-120} python3 benchmarks/engine_bench.py ${ENGINE_ARGS---quick} --csv "$OUT/engine.csv" 2>&1 | tee "$OUT/engine.txt" | tail -40
fi
if [ "${SANITIZE:-0}" = 1 ]; then  # compute-sanitizer over scripts/sanitize_cases.py
  timeout ${SANITIZE_TIMEOUT:-300} python3 scripts/sanitize_cases.py >/dev/null  # compile first
  for run in memcheck:all racecheck:block racecheck:w32; do
    tool=${run%%:*}; cases=${run#*:}
    echo "== $tool --cases $cases" | tee -a "$OUT/sanitize.txt"
    timeout ${SANITIZE_TIMEOUT:-300} compute-sanitizer --tool $tool --error-exitcode 3 --kernel-name-exclude kns=native \
      python3 scripts/sanitize_cases.py --cases $cases 2>&1 | tail -n 25 | tee -a "$OUT/sanitize.txt" | tail -3
  done
fi
if [ "${BENCH:-0}" = 1 ]; then
  timeout ${BENCH_TIMEOUT:-100} python3 -m deepselect bench --quick --csv "$OUT/bench.csv" --plot "$OUT/plots" 2>&1 | tee "$OUT/bench.txt" | tail -30
fi
if [ "${TESTS:-tests}" = none ]; then :; else
# the shards' files stay on the machine (few files come back); their logs in one file
# TESTS=<file>.ids: those test ids (e.g. a run's unfinished.ids, brought back)
targets=${TESTS:-tests}
case $targets in *.ids) targets=$(cat "$targets") ;; esac
if [ -z "$targets" ]; then echo "no test ids in $TESTS: no tests run"; tests_rc=1; else
OUT=/tmp/gpu_tests GPU_TESTS_TIMEOUT=${PYTEST_TIMEOUT:-480} GPU_TESTS_SPLIT=${GPU_TESTS_SPLIT:-queue} GPU_TESTS_SHARDS=${GPU_TESTS_SHARDS:-12} GPU_TESTS_K="${2:-}" bash scripts/gpu_tests.sh $targets 2>&1 | tee "$OUT/pytest.txt" | tail -16
tests_rc=$?
cp /tmp/gpu_tests/unfinished.ids "$OUT/unfinished.ids" 2>/dev/null
fi
cat /tmp/gpu_tests/shard_*.log >"$OUT/shards.txt" 2>/dev/null
cp /tmp/gpu_tests/costs.txt "$OUT/test_costs.txt" 2>/dev/null  # for scripts/gpu_test_costs.txt
fi
if [ "$mode" = full ] || [ -n "${ROBUST:-}" ]; then  # ROBUST="ascending ..." in quick mode too
  for d in ${ROBUST:-shifted tiny ascending distinct32}; do
    timeout ${ROBUST_TIMEOUT:-200} python3 benchmarks/kernel_table.py --quick --dist $d --variant ${ROBUST_VARIANT:-${VARIANT:-default}} \
      --repeats 10 2>&1 | tail -n +2 | tee -a "$OUT/robust.txt"
  done
fi
echo "==== table"; [ -f "$OUT/table.txt" ] && cat "$OUT/table.txt"; [ -f "$OUT/robust.txt" ] && cat "$OUT/robust.txt"
[ -f "$OUT/short.txt" ] && cat "$OUT/short.txt"
exit $tests_rc  # the tests' status (0 when none ran), not whether a table was asked for
