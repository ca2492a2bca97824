#!/usr/bin/env bash
# A command (a benchmark) run with two source trees on one machine, in turns: a
# commit's src/ and the working tree's, so that a change is timed beside what it
# changes in the same call (figures from different machines or calls do not compare).
#   bash scripts/ab_trees.sh prepare REV        here, with git: REV's src/ into .ab/REV/src
#                                               (ignored; name .ab in the GPU call's carry)
#   bash scripts/ab_trees.sh run REV [ROUNDS] -- COMMAND...
#                                               anywhere: COMMAND with REV's tree, then
#                                               with src/, ROUNDS times (default 2); each
#                                               output line prefixed by its tree
# For example, a kernel change against its parent:
#   bash scripts/ab_trees.sh prepare HEAD^
#   bash scripts/ab_trees.sh run HEAD^ 2 -- python3 benchmarks/bracket_variants.py \
#       --rows 512,4096 --n 8192,16384 --dtype float32,bfloat16 --plans BRACKET
# The output also goes to $OUT/ab.txt where OUT is set. Each tree keeps its own Triton
# cache (TRITON_CACHE_DIR/<tree>), so that a kernel of one tree is never taken for the
# other's. AB_DIR: where the trees go (default .ab).
set -uo pipefail
cd "$(dirname "$0")/.."
what=${1:-}
rev=${2:-}
[ -n "$what" ] && [ -n "$rev" ] || { sed -n '2,17p' "$0"; exit 2; }
dir=${AB_DIR:-.ab}/$(echo "$rev" | tr -c 'A-Za-z0-9._\n-' '_')
case "$what" in
prepare)
  rm -rf "$dir" && mkdir -p "$dir" || exit 1
  git archive "$rev" src | tar -x -C "$dir" || exit 1
  echo "$rev ($(git rev-parse --short "$rev")) in $dir/src"
  ;;
run)
  shift 2
  rounds=2
  if [ -n "${1:-}" ] && [ "$1" != "--" ]; then
    rounds=$1
    shift
  fi
  [ "${1:-}" = "--" ] && shift
  [ $# -gt 0 ] || { echo "no command after --" >&2; exit 2; }
  [ -d "$dir/src" ] || { echo "$dir/src missing: run 'prepare $rev' where git is" >&2; exit 2; }
  cache=${TRITON_CACHE_DIR:-/tmp/deepselect-triton-cache}
  log=${OUT:+$OUT/ab.txt}
  rc=0
  for ((i = 1; i <= rounds; i++)); do
    for tree in "$dir/src" src; do
      side=old tag=$rev
      [ "$tree" = src ] && side=new tag=new
      PYTHONPATH=$(cd "$tree" && pwd) TRITON_CACHE_DIR=$cache/ab_$(basename "$dir")_$side \
        "$@" 2>&1 | sed "s|^|[$tag $i] |" | tee -a "${log:-/dev/null}"
      [ "${PIPESTATUS[0]}" = 0 ] || rc=1
    done
  done
  exit $rc
  ;;
*)
  sed -n '2,17p' "$0"
  exit 2
  ;;
esac
