#!/usr/bin/env bash
# One call on a GPU machine (16 cores): the GPU test suite, then `deepselect bench
# --quick` as CUDA-graph replays; logs in $OUT, the tests' tally and the benchmark's
# table printed last.
#   bash scripts/gpu_run.sh [test files or directories | a file of test ids, *.ids]
# The GPU tests are compile-bound (seconds per kernel specialisation), so they run as a
# queue of pieces taken by WORKERS pytest processes sharing one Triton cache: each test
# function's parametrisations stay together (they share specialisations), cut into
# pieces and ordered longest expected first by scripts/gpu_test_pieces.py from the
# seconds per test of an earlier run (scripts/gpu_test_costs.txt; this run's come back
# as $OUT/test_costs.txt), so that no long piece starts late.
# Environment:
#   OUT            logs (default ./out): gpu.txt, collect.txt, piece_<j>.{ids,log,rc},
#                  worker_<w>.{ids,pieces}, results.tsv (each test phase's outcome),
#                  pytest.txt, unfinished.ids (the tests that did not finish in time:
#                  pass the file back as the argument), test_costs.txt, compiles.tsv
#                  (each Triton compile) and compiles.txt (where the compiling time
#                  went), bench.txt, bench.csv
#   WORKERS        parallel pytest processes (default 3/4 of the cores, at least 1);
#                  OMP_NUM_THREADS / NUMBA_NUM_THREADS default to cores / WORKERS
#   TESTS_TIMEOUT  seconds for all the tests together (default 240)
#   TESTS_MARK     marker expression (default gpu; "" selects every test)
#   TESTS_K        a pytest -k expression
#   TESTS_DRY      1: write and print the pieces, run nothing
#   BENCH          0: no benchmark (default 1); BENCH_TIMEOUT its seconds (default 120)
#   PACK           1: at the end, collect.txt, bench.log and the pieces' and workers'
#                  files into $OUT/pieces.tar.gz (a handful of files left in $OUT)
# Exit status: 0 when every test passed (skips allowed) and every benchmarked result
# was exact; 1 otherwise.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD/src:$PWD/tests PYTHONUNBUFFERED=1 TRITON_DEFAULT_FP_FUSION=1
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/deepselect-triton-cache}
mkdir -p "$TRITON_CACHE_DIR"
MARK=${TESTS_MARK-gpu}
TIMEOUT=${TESTS_TIMEOUT:-240}
cores=$(nproc 2>/dev/null || echo 2)
P=${WORKERS:-$((cores * 3 / 4))}
[ "$P" -ge 1 ] 2>/dev/null || P=1
# the workers' CPU work (torch's and Numba's reference definitions) a share of the cores
# each, not every core in every worker: WORKERS processes of a thread pool per core each
# would oversubscribe the cores that the compiles need
share=$((cores / P))
[ "$share" -ge 1 ] || share=1
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$share} NUMBA_NUM_THREADS=${NUMBA_NUM_THREADS:-$share}

if [ "${TESTS_DRY:-0}" != 1 ]; then
  { command -v nvidia-smi >/dev/null &&
    nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
    python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  } 2>&1 | tee "$OUT/gpu.txt"
fi

# ---- the tests: collect, cut into pieces, run the queue
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(tests)
[ ${#targets[@]} -eq 1 ] && [[ ${targets[0]} == *.ids ]] && mapfile -t targets <"${targets[0]}"
select=()
[ -n "$MARK" ] && select+=(-m "$MARK")
[ -n "${TESTS_K:-}" ] && select+=(-k "$TESTS_K")
t0=$(date +%s)
collect_errors=0
if [ ${#targets[@]} -eq 0 ]; then
  echo "no test ids given: no tests run"
  : >"$OUT/collect.txt"
  collect_errors=1
else
  python3 -m pytest --collect-only -q -p no:cacheprovider "${select[@]}" \
    "${targets[@]}" >"$OUT/collect.txt" 2>&1
  rc=$?
  if [ "$rc" != 0 ] && [ "$rc" != 5 ]; then # a file that fails to import fails the run
    collect_errors=$(grep -c '^ERROR ' "$OUT/collect.txt")
    [ "$collect_errors" -ge 1 ] 2>/dev/null || collect_errors=1
    echo "collection failed (rc $rc, $collect_errors errors):"
    grep '^ERROR ' "$OUT/collect.txt" | head -10
  fi
fi
mapfile -t ids < <(grep '::' "$OUT/collect.txt")
rm -rf "$OUT"/piece_* "$OUT"/claim_* "$OUT"/worker_*
if [ ${#ids[@]} -gt 0 ]; then
  [ "$P" -gt ${#ids[@]} ] && P=${#ids[@]}
  printf '%s\n' "${ids[@]}" |
    python3 scripts/gpu_test_pieces.py split "$OUT" "$P" scripts/gpu_test_costs.txt
fi
mapfile -t pieces < <(ls "$OUT" | grep -E '^piece_[0-9]+\.ids$')
echo "collected ${#ids[@]} tests (marker '${MARK}') in $(($(date +%s) - t0)) s:" \
  "${#pieces[@]} pieces, $P workers, ${TIMEOUT} s; Triton cache $TRITON_CACHE_DIR"
if [ "${TESTS_DRY:-0}" = 1 ]; then
  for pc in "${pieces[@]}"; do echo "${pc%.ids}: $(wc -l <"$OUT/$pc") tests"; done
  exit 0
fi

rm -f "$OUT/compiles.tsv" "$OUT/results.tsv"
dir=$OUT
[[ $OUT == /* ]] || dir=$PWD/$OUT
# the workers append each compile (the tests' conftest) and each test phase's outcome
# (gpu_test_pieces' pytest hook) to these
export DEEPSELECT_COMPILE_LOG=$dir/compiles.tsv DEEPSELECT_TEST_LOG=$dir/results.tsv
deadline=$(($(date +%s) + TIMEOUT))
worker() { # worker <w>: take the next unclaimed piece (mkdir claims it once) until none is left
  local w=$1 pc j left
  : >"$OUT/worker_$w.ids"
  : >"$OUT/worker_$w.pieces"
  for pc in "${pieces[@]}"; do
    j=${pc%.ids}
    mkdir "$OUT/claim_$j" 2>/dev/null || continue
    cat "$OUT/$pc" >>"$OUT/worker_$w.ids"
    echo "$j" >>"$OUT/worker_$w.pieces"
    left=$((deadline - $(date +%s)))
    if [ "$left" -le 0 ]; then
      echo "$j: not run, the time was up" >"$OUT/$j.log"
      echo 124 >"$OUT/$j.rc"
      continue
    fi
    # the ids were selected above: no -m here (a marker expression would re-filter them)
    mapfile -t mine <"$OUT/$pc"
    PYTHONPATH=$PYTHONPATH:$PWD/scripts timeout --kill-after=10 "$left" python3 -m pytest -q \
      -p no:cacheprovider -p gpu_test_pieces -o addopts="" -rfE "${mine[@]}" >"$OUT/$j.log" 2>&1
    echo $? >"$OUT/$j.rc"
  done
}
pids=()
for ((w = 0; w < P && ${#pieces[@]} > 0; w++)); do
  worker "$w" &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done
[ ${#pieces[@]} -gt 0 ] && python3 scripts/gpu_test_pieces.py costs "$OUT" scripts/gpu_test_costs.txt >"$OUT/test_costs.txt"
unset DEEPSELECT_COMPILE_LOG
python3 scripts/gpu_test_pieces.py compiles "$OUT" >"$OUT/compiles.txt"

unset DEEPSELECT_TEST_LOG
python3 scripts/gpu_test_pieces.py tally "$OUT" "${#ids[@]}" "$collect_errors" \
  "$(($(date +%s) - t0))" >"$OUT/pytest.txt"
tests_ok=0
grep -q '^total: .*: PASS$' "$OUT/pytest.txt" || tests_ok=1

# ---- the benchmark, then the short report
bench_rc=0
if [ "${BENCH:-1}" = 1 ]; then
  timeout "${BENCH_TIMEOUT:-120}" python3 -m deepselect bench --quick --graph \
    --csv "$OUT/bench.csv" >"$OUT/bench.txt" 2>"$OUT/bench.log"
  bench_rc=$?
  [ "$bench_rc" = 124 ] &&
    echo "deepselect bench: stopped after ${BENCH_TIMEOUT:-120} s" >>"$OUT/bench.txt"
fi
echo "==== Triton compiles ($OUT/compiles.txt)"
head -n 12 "$OUT/compiles.txt"
echo "==== GPU tests ($OUT/pytest.txt)"
cat "$OUT/pytest.txt"
if [ "${BENCH:-1}" = 1 ]; then
  echo "==== deepselect bench --quick --graph ($OUT/bench.txt, bench.csv, bench.log)"
  cat "$OUT/bench.txt"
  [ "$bench_rc" = 0 ] || tail -5 "$OUT/bench.log"
fi
if [ "${PACK:-0}" = 1 ]; then  # few files in $OUT: the pieces' files in one archive
  ( cd "$OUT" && tar czf pieces.tar.gz --ignore-failed-read collect.txt bench.log \
      compiles.tsv results.tsv piece_* worker_* 2>/dev/null
    rm -rf collect.txt bench.log compiles.tsv results.tsv piece_* worker_* claim_* )
fi
[ "$tests_ok" = 0 ] && [ "$bench_rc" = 0 ]
