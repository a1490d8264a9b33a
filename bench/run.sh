#!/usr/bin/env bash
# The runner behind `make bench` (which builds first; this builds nothing).
#   bench/run.sh [BUILD] [NAME...]
# Runs every BUILD/bench/bench_* binary, then every bench/bench_*.py script
# (with /usr/bin/python3, and SB_BIN/SB_ROOT set), in turn; or only
# bench_NAME for each NAME given. Each prints one JSON line per figure on
# stdout:
#   {"bench":NAME,"value":V,"unit":U,"baseline":B,"ratio":V/B,...}
# and its progress on stderr. The JSON lines are shown as they come and
# appended to BUILD/bench-results.jsonl, each with "commit" and "at" added
# so runs can be told apart later. Exits non-zero when a benchmark fails
# (the others still run).
set -u
BUILD=${1:-build}
[ $# -gt 0 ] && shift
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT="$BUILD/bench-results.jsonl"

export SB_ROOT="$ROOT"
case "$BUILD" in /*) export SB_BIN="$BUILD/switchboard" ;; *) export SB_BIN="$ROOT/$BUILD/switchboard" ;; esac

benches=()
if [ $# -gt 0 ]; then
    for name in "$@"; do
        name=${name#bench_}
        if [ -f "bench/bench_$name.py" ]; then benches+=("bench/bench_$name.py")
        else benches+=("$BUILD/bench/bench_$name"); fi
    done
else
    for b in "$BUILD"/bench/bench_* bench/bench_*.py; do
        [ -e "$b" ] && benches+=("$b")
    done
fi

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null; [ $? -eq 1 ] && commit="$commit+dirty"
at=$(date -u +%Y-%m-%dT%H:%M:%SZ)
echo "benchmarks at $commit on $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo "results are appended to $OUT" >&2

failed=()
for b in "${benches[@]}"; do
    case "$b" in
        *.py) cmd=(/usr/bin/python3 "$b") ;;
        *)    cmd=("$b")
              if [ ! -x "$b" ]; then
                  echo "bench/run.sh: $b is missing (run 'make bench')" >&2
                  failed+=("$(basename "$b")")
                  continue
              fi ;;
    esac
    name=$(basename "$b")
    echo "== $name" >&2
    t0=$(date +%s)
    # stdout: keep the JSON lines, show them, stamp and append them
    "${cmd[@]}" | while IFS= read -r line; do
        printf '%s\n' "$line"
        case "$line" in
            \{*\}) printf '%s,"commit":"%s","at":"%s"}\n' "${line%\}}" "$commit" "$at" >>"$OUT" ;;
        esac
    done
    rc=${PIPESTATUS[0]}
    if [ "$rc" -ne 0 ]; then
        echo "bench/run.sh: $name exited $rc" >&2
        failed+=("$name")
    else
        echo "== $name done in $(( $(date +%s) - t0 )) s" >&2
    fi
done

if [ ${#failed[@]} -gt 0 ]; then
    echo "failed: ${failed[*]}" >&2
    exit 1
fi
