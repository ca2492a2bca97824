#!/usr/bin/env bash
# Every test of a marker expression (default "gpu"), in P parallel pytest processes on
# one machine. Triton compilation dominates the GPU suite (seconds per kernel
# specialisation), so shards share one TRITON_CACHE_DIR and run side by side on the
# same GPU(s); round-robin keeps the shards' lengths alike.
#   bash scripts/gpu_tests.sh [test files or directories; default tests]
# Environment:
#   GPU_TESTS_MARK     marker expression (default "gpu"; "" selects every test)
#   GPU_TESTS_SHARDS   parallel pytest processes (default min(8, nproc / 2), at least 1)
#   GPU_TESTS_TIMEOUT  seconds per shard (default 300)
#   GPU_TESTS_K        optional pytest -k expression
#   GPU_TESTS_SPLIT    "tests" (default): round-robin over test ids; "functions":
#                      the parametrisations of one function (which share kernel
#                      specialisations) stay together, in pieces of at most tests / P,
#                      and the pieces are balanced over the shards; "queue": the same
#                      pieces cut to at most tests / (3 P), and each of P workers takes
#                      the next piece (longest first) when it is done with one, one
#                      pytest process a piece: shards of equal counts took 18 to 406 s
#                      on the GPU machine (compile time differs from test to test)
#   GPU_TESTS_COSTS    queue: seconds per test of each function, from an earlier run
#                      (default scripts/gpu_test_costs.txt; "" none): the pieces go
#                      longest first and none is longer than a 3P-th of the whole;
#                      a queue run writes its own to $OUT/costs.txt
#   GPU_TESTS_DRY      1: write and print the split, run nothing
#   OUT                logs: collect.txt, shard_<i>.ids, shard_<i>.log, unfinished.ids
#                      (queue: the tests of pieces the time ran out on) (default ./out)
#   TRITON_CACHE_DIR   compiled kernels (default /tmp/deepselect-triton-cache)
# Exit status: 0 when every shard passed (skips allowed), 1 otherwise.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD/src:$PWD/tests PYTHONUNBUFFERED=1
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/deepselect-triton-cache}
mkdir -p "$TRITON_CACHE_DIR"
MARK=${GPU_TESTS_MARK-gpu}
COSTS=${GPU_TESTS_COSTS-scripts/gpu_test_costs.txt}
TIMEOUT=${GPU_TESTS_TIMEOUT:-300}
cores=$(nproc 2>/dev/null || echo 2)
P=${GPU_TESTS_SHARDS:-$((cores / 2 < 8 ? cores / 2 : 8))}
[ "$P" -ge 1 ] 2>/dev/null || P=1
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(tests)
select=()
[ -n "$MARK" ] && select+=(-m "$MARK")
[ -n "${GPU_TESTS_K:-}" ] && select+=(-k "$GPU_TESTS_K")

t0=$(date +%s)
python3 -m pytest --collect-only -q -p no:cacheprovider "${select[@]}" "${targets[@]}" \
  >"$OUT/collect.txt" 2>&1
collect_rc=$?
# a file that fails to import must fail the run, even though the others still run
collect_errors=0
if [ "$collect_rc" != 0 ] && [ "$collect_rc" != 5 ]; then
  collect_errors=$(grep -c '^ERROR ' "$OUT/collect.txt")
  [ "$collect_errors" -ge 1 ] 2>/dev/null || collect_errors=1
  echo "collection failed (rc $collect_rc, $collect_errors errors):"
  grep '^ERROR ' "$OUT/collect.txt" | head -10
fi
mapfile -t ids < <(grep '::' "$OUT/collect.txt")
if [ ${#ids[@]} -eq 0 ]; then
  echo "no tests collected for marker '${MARK}' in ${targets[*]}; see $OUT/collect.txt"
  tail -5 "$OUT/collect.txt"
  exit 1
fi
[ "$P" -gt ${#ids[@]} ] && P=${#ids[@]}
echo "collected ${#ids[@]} tests (marker '${MARK}') in $(($(date +%s) - t0)) s; $P shards," \
  "timeout ${TIMEOUT} s each; Triton cache $TRITON_CACHE_DIR"

for ((s = 0; s < P; s++)); do : >"$OUT/shard_$s.ids"; done
rm -rf "$OUT"/piece_* "$OUT"/claim_* "$OUT"/shard_*.pieces
split=${GPU_TESTS_SPLIT:-tests}
if [ "$split" = functions ] || [ "$split" = queue ]; then
  # each function's tests together, in pieces (scripts/gpu_test_pieces.py): functions:
  # balanced over the shards; queue: files taken in order, longest expected first
  printf '%s\n' "${ids[@]}" |
    python3 scripts/gpu_test_pieces.py split "$OUT" "$P" "$split" "$COSTS"
else
  for i in "${!ids[@]}"; do printf '%s\n' "${ids[$i]}" >>"$OUT/shard_$((i % P)).ids"; done
fi
mapfile -t pieces < <(ls "$OUT" | grep -E '^piece_[0-9]+\.ids$')
if [ "${GPU_TESTS_DRY:-0}" = 1 ]; then # the split only
  for ((s = 0; s < P; s++)); do echo "shard $s: $(wc -l <"$OUT/shard_$s.ids") tests"; done
  for pc in "${pieces[@]}"; do echo "${pc%.ids}: $(wc -l <"$OUT/$pc") tests"; done
  exit 0
fi

run_ids() { # run_ids <ids file> <log> <seconds>: one pytest process over those ids
  local -a mine
  mapfile -t mine <"$1"
  # the ids were selected above: no -m here (a marker expression would re-filter them)
  timeout --kill-after=10 "$3" python3 -m pytest -q -p no:cacheprovider -o addopts="" \
    -rfE "${mine[@]}" >"$2" 2>&1
}

pids=()
deadline=$(($(date +%s) + TIMEOUT))
for ((s = 0; s < P; s++)); do
  if [ "$split" = queue ]; then
    (
      # take the next unclaimed piece (mkdir claims it once) until none is left or
      # the time is up; the worker's log gathers its pieces' logs
      : >"$OUT/shard_$s.log"
      for pc in "${pieces[@]}"; do
        j=${pc%.ids}
        mkdir "$OUT/claim_$j" 2>/dev/null || continue
        cat "$OUT/$pc" >>"$OUT/shard_$s.ids"
        left=$((deadline - $(date +%s)))
        if [ "$left" -le 0 ]; then
          echo "$j: not run, the time was up" >"$OUT/$j.log"
          echo 124 >"$OUT/$j.rc"
        else
          run_ids "$OUT/$pc" "$OUT/$j.log" "$left"
          echo $? >"$OUT/$j.rc"
        fi
        { echo "== $j"; cat "$OUT/$j.log"; } >>"$OUT/shard_$s.log"
        echo "$j" >>"$OUT/shard_$s.pieces"
      done
    ) &
  else
    (
      # a shard left without tests (fewer pieces of functions than shards) runs nothing:
      # pytest given no ids would collect every test
      if [ ! -s "$OUT/shard_$s.ids" ]; then
        echo "no tests in this shard in 0.00s" >"$OUT/shard_$s.log"
        echo 0 >"$OUT/shard_$s.rc"
        exit 0
      fi
      run_ids "$OUT/shard_$s.ids" "$OUT/shard_$s.log" "$TIMEOUT"
      echo $? >"$OUT/shard_$s.rc"
    ) &
  fi
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done
[ "$split" = queue ] && python3 scripts/gpu_test_pieces.py costs "$OUT" >"$OUT/costs.txt"
# the tests of pieces the time ran out on (queue), for a call of their own:
#   TESTS=<this file> bash scripts/gpu_run.sh (or gpu_tests.sh $(cat <this file>))
: >"$OUT/unfinished.ids"
for pc in "${pieces[@]}"; do
  rc=$(cat "$OUT/${pc%.ids}.rc" 2>/dev/null || echo 124)
  { [ "$rc" = 124 ] || [ "$rc" = 137 ]; } && cat "$OUT/$pc" >>"$OUT/unfinished.ids"
done

count() { # count <word> <line>: the number before "<word>" in pytest's summary line
  local n
  n=$(grep -oE "[0-9]+ $1" <<<"$2" | head -1 | cut -d' ' -f1)
  echo "${n:-0}"
}
tally() { # tally <log> <rc file>: "passed failed errors skipped state" of one pytest run
  local rc line p f e sk state
  rc=$(cat "$2" 2>/dev/null || echo 1)
  # pytest -q ends with e.g. "3 passed, 1 skipped in 2.31s" (possibly between '=' rules)
  line=$(grep -E '[0-9]+ (passed|failed|error|errors|skipped|deselected)' "$1" |
    grep -E ' in [0-9.]+s' | tail -1)
  p=$(count passed "$line") f=$(count failed "$line") e=$(count error "$line")
  sk=$(count skipped "$line")
  state=ok
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    state="TIMEOUT after ${TIMEOUT} s"
    e=$((e + 1))
  elif [ "$rc" != 0 ] && [ "$rc" != 5 ]; then
    state="rc=$rc"
    [ "$f" = 0 ] && [ "$e" = 0 ] && e=1 # a crash without a summary line still fails
  fi
  echo "$p $f $e $sk $state"
}
total_p=0 total_f=0 total_e=0 total_s=0 bad=0
for ((s = 0; s < P; s++)); do
  if [ "$split" = queue ]; then # the sum over the worker's pieces
    p=0 f=0 e=0 sk=0 state=ok
    while read -r j; do
      read -r pp ff ee ss st <<<"$(tally "$OUT/$j.log" "$OUT/$j.rc")"
      p=$((p + pp)) f=$((f + ff)) e=$((e + ee)) sk=$((sk + ss))
      [ "$st" != ok ] && state="$st ($j)"
    done < <(cat "$OUT/shard_$s.pieces" 2>/dev/null)
  else
    read -r p f e sk state <<<"$(tally "$OUT/shard_$s.log" "$OUT/shard_$s.rc")"
  fi
  [ "$state" != ok ] && bad=1
  n=$(wc -l <"$OUT/shard_$s.ids")
  printf 'shard %d: %3d tests  %3d passed  %3d failed  %3d errors  %3d skipped  %s  (%s)\n' \
    "$s" "$n" "$p" "$f" "$e" "$sk" "$state" "$OUT/shard_$s.log"
  total_p=$((total_p + p)) total_f=$((total_f + f)) total_e=$((total_e + e))
  total_s=$((total_s + sk))
done
total_e=$((total_e + collect_errors))
status=PASS
[ "$bad" = 1 ] || [ "$total_f" -gt 0 ] || [ "$total_e" -gt 0 ] && status=FAIL
printf 'total: %d tests  %d passed  %d failed  %d errors  %d skipped  in %d s: %s\n' \
  "${#ids[@]}" "$total_p" "$total_f" "$total_e" "$total_s" "$(($(date +%s) - t0))" "$status"
[ "$collect_errors" != 0 ] && echo "($collect_errors collection errors: see $OUT/collect.txt)"
if [ "$status" = FAIL ]; then
  grep -hE '^(FAILED|ERROR) ' "$OUT"/shard_*.log | head -40
  [ -s "$OUT/unfinished.ids" ] && echo "$(wc -l <"$OUT/unfinished.ids") tests not finished" \
    "in time: their ids in $OUT/unfinished.ids"
  exit 1
fi
exit 0
