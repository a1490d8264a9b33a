#!/usr/bin/env bash
# The test runner behind `make test` and `make asan`.
#   tests/run_all.sh BUILD [unit|integration|fuzz|all]
# Runs every Criterion binary in BUILD/tests, every tests/integration/test_*
# script (exit 0 pass, 77 skip with a reason on stdout, anything else fail),
# and a short smoke pass of every fuzz target. Ends with the plain line
# "N passed, N failed, N skipped" that CI reads.
set -u
BUILD=${1:-build}
WHAT=${2:-all}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export SB_BIN="$ROOT/$BUILD/switchboard"
export SB_ROOT="$ROOT"
export SB_FIXTURES="${SB_FIXTURES:-$ROOT/tests/fixtures/llm}"
LOGDIR="$ROOT/$BUILD/test-logs"
mkdir -p "$LOGDIR"
passed=0; failed=0; skipped=0; failures=(); recap=()

# What failed, in a few lines: sbtest's closing "FAILED test: message"
# lines, Criterion's [FAIL] and [----] assertion lines, a shell test's
# "FAIL: ..." and the runner's own time-limit note. Without any of these,
# the last lines of the log stand in.
failure_lines() {  # log
    local lines
    lines=$(grep -E '^FAILED |^\[FAIL\] |^\[----\] .*[^[:space:]]|^FAIL: |^timed out after ' "$1" | head -n 40)
    [ -n "$lines" ] || lines=$(grep -v '^[[:space:]]*$' "$1" | tail -n 3)
    printf '%s\n' "$lines"
}

run_one() {  # name, log, command...
    local name=$1 log=$2; shift 2
    local t0=$(date +%s%N)
    # a hung test fails on its own instead of stalling the whole suite
    timeout -k 10 "${SB_TEST_TIMEOUT:-300}" "$@" >"$log" 2>&1
    local rc=$?
    [ $rc -eq 124 ] && echo "timed out after ${SB_TEST_TIMEOUT:-300} s" >>"$log"
    local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    local dt="$((ms / 1000)).$(( (ms % 1000) / 100 ))"
    if [ $rc -eq 0 ]; then
        passed=$((passed + 1)); printf '  PASS  %-44s %6ss\n' "$name" "$dt"
    elif [ $rc -eq 77 ]; then
        skipped=$((skipped + 1)); printf '  SKIP  %-44s %s\n' "$name" "$(tail -n 1 "$log")"
    else
        failed=$((failed + 1)); failures+=("$name")
        printf '  FAIL  %-44s %6ss (exit %d)\n' "$name" "$dt" "$rc"
        # the log's tail for context (the servers' logs end a failed
        # Python test), then what failed as the block's last lines
        grep -v '^FAILED ' "$log" | tail -n 25 | sed 's/^/        | /'
        local what
        what=$(failure_lines "$log")
        printf '%s\n' "$what" | sed 's/^/        > /'
        while IFS= read -r line; do recap+=("$name: $line"); done < <(printf '%s\n' "$what" | head -n 8)
    fi
    return $rc
}

if [ "$WHAT" = all ] || [ "$WHAT" = unit ]; then
    echo "unit tests (Criterion)"
    for t in "$BUILD"/tests/test_*; do
        [ -x "$t" ] || continue
        name=$(basename "$t")
        # a failed binary's block ends with its failures, not this line
        run_one "unit/$name" "$LOGDIR/$name.log" "$t" --jobs 2 &&
            grep -h '^\[====\] Synthesis' "$LOGDIR/$name.log" | sed 's/^/        /'
    done
fi

if [ "$WHAT" = all ] || [ "$WHAT" = integration ]; then
    echo "integration tests (real binary, loopback)"
    for t in tests/integration/test_*; do
        [ -f "$t" ] || continue
        name=$(basename "$t")
        case "$t" in
            *.py) run_one "integration/$name" "$LOGDIR/$name.log" /usr/bin/python3 "$t" ;;
            *.sh) run_one "integration/$name" "$LOGDIR/$name.log" bash "$t" ;;
        esac
    done
fi

if { [ "$WHAT" = all ] || [ "$WHAT" = fuzz ]; } && [ -z "${SB_ASAN:-}" ]; then
    echo "fuzz smoke (libFuzzer, a few seconds each)"
    # the targets are built without UBSan recovery; halting here too makes
    # a report fail the target even from an object built otherwise
    export UBSAN_OPTIONS="halt_on_error=1:abort_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
    for f in build-fuzz/fuzz_*; do
        [ -x "$f" ] || continue
        name=$(basename "$f"); corpus="tests/fuzz/corpus/${name#fuzz_}"
        mkdir -p "$corpus"
        tmpc=$(mktemp -d)
        # libFuzzer exits 77 on a crash by default: the code this runner
        # reads as a skip, so a finding would pass unseen
        run_one "fuzz/$name" "$LOGDIR/$name.log" "$f" -max_total_time=${SB_FUZZ_SECONDS:-5} -timeout=10 \
            -rss_limit_mb=2048 -error_exitcode=1 -timeout_exitcode=1 -artifact_prefix="$LOGDIR/$name-" \
            "$tmpc" "$corpus"
        rm -rf "$tmpc"
    done
fi

echo
if [ ${#failures[@]} -gt 0 ]; then
    # again at the very end, where a truncated CI log still shows it
    echo "failed: ${failures[*]}"
    printf '  %s\n' "${recap[@]}"
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
