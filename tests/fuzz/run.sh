#!/usr/bin/env bash
# Runs the libFuzzer targets (`make fuzz` builds them, then calls this).
#   tests/fuzz/run.sh [long|smoke] [NAME...]
# long   each target for ${SB_FUZZ_SECONDS:-300} s (the default mode)
# smoke  each target for ${SB_FUZZ_SECONDS:-5} s
# NAME   only fuzz_NAME (default: every build-fuzz/fuzz_* binary)
#
# Each target starts from its committed corpus tests/fuzz/corpus/<NAME>
# (NAME without the fuzz_ prefix). New inputs go to a temp dir listed
# first, so the committed corpus never grows by itself; to keep them,
# merge: build-fuzz/fuzz_NAME -merge=1 tests/fuzz/corpus/NAME DIR.
# A crash, leak or timeout leaves its input in build-fuzz/artifacts/NAME/
# and its log in build-fuzz/logs/NAME.log; the script reports every one
# and exits 1 when any target failed.
set -u
MODE=${1:-long}
[ $# -gt 0 ] && shift
case "$MODE" in
    long)  SECONDS_EACH=${SB_FUZZ_SECONDS:-300} ;;
    smoke) SECONDS_EACH=${SB_FUZZ_SECONDS:-5} ;;
    *) echo "usage: tests/fuzz/run.sh [long|smoke] [NAME...]" >&2; exit 2 ;;
esac
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"

if [ $# -gt 0 ]; then
    targets=()
    for name in "$@"; do targets+=("build-fuzz/fuzz_${name#fuzz_}"); done
else
    targets=(build-fuzz/fuzz_*)
fi

# A UBSan report fails the target: the Makefile builds without recovery,
# and halting here covers an object built otherwise.
export UBSAN_OPTIONS="halt_on_error=1:abort_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

tmproot=$(mktemp -d /tmp/sbfuzzXXXXXX)
trap 'rm -rf "$tmproot"' EXIT
mkdir -p build-fuzz/logs

failed=()
ran=0
for f in "${targets[@]}"; do
    [ -f "$f" ] && [ -x "$f" ] || { echo "tests/fuzz/run.sh: $f is missing (run 'make fuzz')" >&2; failed+=("$f"); continue; }
    name=$(basename "$f"); short=${name#fuzz_}
    corpus="tests/fuzz/corpus/$short"
    new="$tmproot/$short"
    art="build-fuzz/artifacts/$short"
    log="build-fuzz/logs/$short.log"
    mkdir -p "$corpus" "$new" "$art"
    before=$(ls "$art" | wc -l)
    printf '  %-20s %4d s, corpus %d inputs ... ' "$name" "$SECONDS_EACH" "$(ls "$corpus" | wc -l)"
    "$f" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -error_exitcode=1 -timeout_exitcode=1 \
        -artifact_prefix="$art/" "$new" "$corpus" >"$log" 2>&1
    rc=$?
    ran=$((ran + 1))
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    found=$(ls "$new" | wc -l)
    after=$(ls "$art" | wc -l)
    if [ $rc -ne 0 ] || [ "$after" -gt "$before" ] || grep -q 'runtime error:' "$log"; then
        failed+=("$name")
        echo "FAILED (exit $rc)"
        grep -m1 -E 'ERROR: (libFuzzer|AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer)|runtime error|SUMMARY' "$log" | sed 's/^/      /'
        ls -t "$art" | head -3 | sed "s|^|      input: $art/|"
        echo "      log:   $log"
    else
        echo "ok, ${execs:-?} runs, $found new inputs"
    fi
done

echo "$ran fuzz targets run, ${#failed[@]} failed"
if [ ${#failed[@]} -gt 0 ]; then
    echo "failed: ${failed[*]}"
    exit 1
fi
