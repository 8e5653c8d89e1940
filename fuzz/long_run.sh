#!/usr/bin/env bash
# A long fuzzing run: the libFuzzer targets one after the other (one process at a time, at the
# lowest CPU priority, so that it can run beside other work), each for its share of minutes,
# over a scratch copy of its committed corpus in WORK (default /tmp/jtree-fuzz-long) with the
# dictionary. A crash does not end a target's time: the input is kept under
# WORK/findings-<target>/ and the target starts again for the minutes it has left.
# At the end (and in WORK/summary.md) one row per target: minutes, inputs run, coverage
# (edges "cov" and features "ft" at the end), corpus size, crashes.
#
# Usage: fuzz/long_run.sh BUILD_DIR TARGET=MINUTES...
#   e.g. fuzz/long_run.sh build-fuzz-long open=18 read=18 header=12 index=12 layout=4 \
#          chunk_codec=7 roundtrip=7 content_range=3 s3_xml=5
# BUILD_DIR is a fuzz build (cmake --preset fuzz -B BUILD_DIR; cmake --build BUILD_DIR).
# Cumulative runs: a second run with the same WORK starts from the corpora the first one grew.
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n 2,15p "$0" >&2; exit 2; }
build=$1
shift
work=${WORK:-/tmp/jtree-fuzz-long}
mkdir -p "$work"
summary=$work/summary.md
{
  echo "| target | minutes | inputs run | cov | ft | corpus | crashes |"
  echo "|---|---:|---:|---:|---:|---:|---:|"
} > "$summary"

for spec in "$@"; do
  t=${spec%%=*}
  minutes=${spec#*=}
  exe=$build/fuzz/fuzz_$t
  [ -x "$exe" ] || { echo "long_run.sh: no $exe" >&2; exit 2; }
  corpus=$work/$t findings=$work/findings-$t
  mkdir -p "$corpus" "$findings"
  cp -rn "fuzz/corpus/$t/." "$corpus/"  # keeps what an earlier run added
  log=$work/log-$t.txt
  : > "$log"
  start=$SECONDS
  deadline=$((start + minutes * 60))
  execs=0 runs=0
  echo "-- fuzz_$t: $minutes min ($(date -u +%H:%M:%S) UTC)"
  while [ $((deadline - SECONDS)) -gt 5 ] && [ $runs -lt 50 ]; do
    runs=$((runs + 1))
    one=$work/run-$t.txt
    nice -n 19 "$exe" -max_total_time=$((deadline - SECONDS)) -timeout=10 -rss_limit_mb=2048 \
      -dict=fuzz/jtree.dict -print_final_stats=1 -artifact_prefix="$findings/" \
      "$corpus" > "$one" 2>&1
    # (A run that crashed prints no final stats: its count is that of its last status line.)
    n=$(grep -E "^stat::number_of_executed_units" "$one" | awk '{print $2}')
    [ -n "$n" ] || n=$(grep -E "^#[0-9]+" "$one" | tail -n 1 | sed -E 's/^#([0-9]+).*/\1/')
    execs=$((execs + ${n:-0}))
    cat "$one" >> "$log"
  done
  last=$(grep -E "^#[0-9]+.*cov: " "$log" | tail -n 1)
  cov=$(sed -nE 's/.*cov: ([0-9]+).*/\1/p' <<< "$last")
  ft=$(sed -nE 's/.*ft: ([0-9]+).*/\1/p' <<< "$last")
  crashes=$(find "$findings" -type f | wc -l)
  size=$(find "$corpus" -type f | wc -l)
  elapsed=$(( (SECONDS - start + 30) / 60 ))
  echo "| fuzz_$t | $elapsed | $execs | $cov | $ft | $size | $crashes |" | tee -a "$summary"
done
echo
cat "$summary"
