#!/usr/bin/env bash
# The safety tests (issue "Safe on hostile input, safe under faults"), in three sanitizer
# builds of CMakePresets.json:
#  1. asan  (ASan + UBSan + LeakSanitizer): every C++ test — unit tests, the safety tests of
#           tests/safety/ (corruption gauntlet, injected faults, killed writers, limits) and the
#           replay of every fuzz corpus and past crash — except those needing real servers;
#  2. tsan  (ThreadSanitizer): the tests that run threads against each other (many readers of
#           one Reader, the writer's pool, the thread pool, faults under concurrency, loads to
#           a device through the host stand-in engine);
#  3. fuzz  (clang, libFuzzer + ASan + UBSan): each fuzz target for JTREE_FUZZ_SECONDS seconds
#           (default 20) over a scratch copy of its corpus with the format's dictionary; any
#           crash, leak, sanitizer report or timeout fails the script (the input is kept under
#           build-safety-fuzz/findings/<target>/ — copy it to fuzz/crashes/<target>/ once fixed,
#           so that the replay keeps checking it);
#  4. python (atheris): the Python load path (fuzz/python/fuzz_load.py): the package installed
#           into .venv from this checkout, its corpus and past crashes replayed, then fuzzed
#           for JTREE_PY_FUZZ_SECONDS seconds (default 45); only jtree.Error may come out.
#           (pip builds in build-pip/, as scripts/test_python.sh does, so that one of the two
#           builds is incremental; JTREE_SAFETY_PIP_BUILD_DIR=DIR builds elsewhere.)
# Usage: scripts/test_safety.sh [asan|tsan|fuzz|python]...   (default: all four, in that order)
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install_deps.sh build safety

jobs=2  # the machines this runs on have few cores and are shared: never more than 2
fuzz_seconds=${JTREE_FUZZ_SECONDS:-20}
py_fuzz_seconds=${JTREE_PY_FUZZ_SECONDS:-45}
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
[ $# -gt 0 ] || set -- asan tsan fuzz python
start=$SECONDS
stamp() { echo "   ($((SECONDS - start)) s so far)"; }

run_asan() {
  echo "== ASan + UBSan build: all tests ===================================================="
  cmake --preset asan >/dev/null
  cmake --build --preset asan
  echo "== ASan + UBSan: unit, safety and fuzz replay tests ================================="
  ctest --preset asan -LE servers
  stamp
}

run_tsan() {
  echo "== TSan build: the concurrent tests ================================================="
  cmake --preset tsan >/dev/null
  # Only what runs threads against each other: many readers of one Reader (test_concurrency in
  # test_roundtrip), the thread pool (test_io), the writers and readers under faults (safety),
  # and the loads to a device (fillers, the stand-in engine's stream threads, O_DIRECT and
  # zero-copy batches; about 25 s together under TSan).
  # (Not the crash tests: TSan does not support threads in the child of a threaded fork.)
  local targets=(test_roundtrip test_io test_safety_faults test_device_staging test_device_direct
                 test_device_zero_copy)
  cmake --build --preset tsan --target "${targets[@]}"
  echo "== TSan: the concurrent tests ======================================================="
  local regex
  regex="^($(IFS='|'; echo "${targets[*]}"))$"
  ctest --preset tsan -R "$regex"
  stamp
}

run_fuzz() {
  echo "== libFuzzer build (clang, ASan + UBSan) ============================================"
  cmake --preset fuzz >/dev/null
  cmake --build --preset fuzz
  echo "== fuzzing: ${fuzz_seconds} s per target ============================================="
  local out=build-safety-fuzz/findings work=build-safety-fuzz/corpus-run
  rm -rf "$work"
  mkdir -p "$out"
  local failed=()
  for exe in build-safety-fuzz/fuzz/fuzz_*; do
    [ -x "$exe" ] || continue
    local t=${exe##*/fuzz_}
    [ -d "fuzz/corpus/$t" ] || { echo "no corpus for $t" >&2; failed+=("$t"); continue; }
    # A copy: what libFuzzer adds to its corpus stays out of the committed seeds.
    mkdir -p "$work/$t" "$out/$t"
    cp -r "fuzz/corpus/$t/." "$work/$t/"
    echo "-- fuzz_$t"
    if ! "$exe" -max_total_time="$fuzz_seconds" -timeout=10 -rss_limit_mb=2048 \
        -dict=fuzz/jtree.dict -print_final_stats=1 -artifact_prefix="$out/$t/" \
        "$work/$t" > "$out/$t/log.txt" 2>&1; then
      failed+=("$t")
      tail -n 40 "$out/$t/log.txt"
    else
      grep -E "^stat::(number_of_executed_units|new_units_added)|cov: " "$out/$t/log.txt" | tail -n 3
    fi
  done
  stamp
  if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzzing found problems in: ${failed[*]} (inputs under $out/)" >&2
    return 1
  fi
}

run_python() {
  echo "== atheris: the Python load path ================================================="
  ./scripts/install_deps.sh python
  ./scripts/python_env.sh safety
  local pip_dir=()
  [ -z "${JTREE_SAFETY_PIP_BUILD_DIR:-}" ] || pip_dir=(-C "build-dir=$JTREE_SAFETY_PIP_BUILD_DIR")
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps \
    "${pip_dir[@]}" . 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
  local out=build-safety-fuzz/findings/python work=build-safety-fuzz/corpus-run/python
  rm -rf "$work"
  mkdir -p "$out" "$work"
  echo "-- replay: fuzz/corpus/python, fuzz/crashes/python"
  .venv/bin/python fuzz/python/fuzz_load.py --replay fuzz/corpus/python fuzz/crashes/python
  echo "-- fuzz_load.py: ${py_fuzz_seconds} s"
  cp -r fuzz/corpus/python/. "$work/"
  if ! .venv/bin/python fuzz/python/fuzz_load.py -max_total_time="$py_fuzz_seconds" \
      -timeout=30 -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$out/" \
      -dict=fuzz/jtree.dict "$work" fuzz/corpus/open > "$out/log.txt" 2>&1; then
    tail -n 60 "$out/log.txt"
    echo "atheris found a problem in the Python load path (input under $out/)" >&2
    return 1
  fi
  grep -E "^stat::(number_of_executed_units|new_units_added)|cov: " "$out/log.txt" | tail -n 3
  # The GGUF reader of `jtree convert` (jtree's own parser of a foreign format): seeds written
  # by GGUFWriter, then fuzzed as long as the load path.
  echo "-- fuzz_convert_gguf.py: ${py_fuzz_seconds} s"
  local gwork=build-safety-fuzz/corpus-run/gguf gout=$out/gguf
  rm -rf "$gwork"
  mkdir -p "$gwork" "$gout"
  .venv/bin/python fuzz/python/fuzz_convert_gguf.py --make-corpus "$gwork"
  if ! .venv/bin/python fuzz/python/fuzz_convert_gguf.py -max_total_time="$py_fuzz_seconds" \
      -timeout=30 -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$gout/" \
      "$gwork" > "$gout/log.txt" 2>&1; then
    tail -n 60 "$gout/log.txt"
    echo "atheris found a problem in the GGUF reader (input under $gout/)" >&2
    return 1
  fi
  grep -E "^stat::(number_of_executed_units|new_units_added)" "$gout/log.txt" | tail -n 2
  # The safetensors reader of `jtree convert` (its header checks are jtree's own code): seeds
  # from safetensors' save_file and jtree's writer, fuzzed as long.
  echo "-- fuzz_convert_safetensors.py: ${py_fuzz_seconds} s"
  local swork=build-safety-fuzz/corpus-run/safetensors sout=$out/safetensors
  rm -rf "$swork"
  mkdir -p "$swork" "$sout"
  .venv/bin/python fuzz/python/fuzz_convert_safetensors.py --make-corpus "$swork"
  if ! .venv/bin/python fuzz/python/fuzz_convert_safetensors.py \
      -max_total_time="$py_fuzz_seconds" -timeout=30 -rss_limit_mb=4096 -print_final_stats=1 \
      -artifact_prefix="$sout/" "$swork" > "$sout/log.txt" 2>&1; then
    tail -n 60 "$sout/log.txt"
    echo "atheris found a problem in the safetensors reader (input under $sout/)" >&2
    return 1
  fi
  grep -E "^stat::(number_of_executed_units|new_units_added)" "$sout/log.txt" | tail -n 2
  stamp
}

for step in "$@"; do
  case "$step" in
    asan) run_asan ;;
    tsan) run_tsan ;;
    fuzz) run_fuzz ;;
    python) run_python ;;
    *) echo "test_safety.sh: unknown step $step (asan, tsan, fuzz or python)" >&2; exit 2 ;;
  esac
done
echo "== safety tests passed in $((SECONDS - start)) s ========================================"
