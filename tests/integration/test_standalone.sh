#!/usr/bin/env bash
# The repository stands alone: a clone with nothing beside it builds and
# passes the tests that read the LLM fixtures.
#
# The files git knows of (tracked, and untracked but not ignored) are
# copied into a fresh temp folder, with no sibling folders at all. No file
# may point outside the repository. In the copy, `make all units` builds,
# then, with SB_FIXTURES unset so that every default path is exercised,
# the unit binaries test_provider and test_sse (run from another working
# directory) and the integration files test_llm_fixtures.py and
# test_runs_e2e.py must pass.
#
# Exit 0 pass, 77 skip (the reason on the last line), anything else fail.
set -u
ROOT=${SB_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
JOBS=${SB_STANDALONE_JOBS:-2}

skip() { echo "$1"; exit 77; }
fail() { echo "FAIL: $1"; exit 1; }

# Under `make asan` the plain suite has already checked this, and a second
# sanitized build of the whole tree would only cost minutes.
[ -n "${SB_ASAN:-}" ] && skip "the standalone copy is checked by the plain suite, not under asan"
command -v git >/dev/null || skip "git is not installed"
git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1 || skip "$ROOT is not a git checkout"

# 1. Nothing tracked refers outside the repository. The patterns are built
#    from pieces so that this file does not match itself.
parent="\.\./"
outside="${parent}shared"
design="DESIGN""\.md"
hits=$(git -C "$ROOT" grep -n -E "${outside}|${design}" -- . 2>/dev/null)
[ -z "$hits" ] || fail "files refer outside the repository:
$hits"

# 2. The copy: in a folder of its own, so that no `../anything` exists.
tmp=$(mktemp -d /tmp/sbstandaloneXXXXXX) || fail "mktemp"
trap 'rm -rf "$tmp"' EXIT
copy="$tmp/repo"
mkdir "$copy"
(
    cd "$ROOT" &&
    git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do
        # a tracked file deleted in the work tree is not part of the copy
        [ -e "$f" ] && printf '%s\0' "$f"
    done | tar --null -T - -cf - | tar -xf - -C "$copy"
) || fail "copying the tracked files to $copy"
[ -f "$copy/Makefile" ] || fail "the copy has no Makefile"
[ -d "$copy/tests/fixtures/llm" ] || fail "the copy has no tests/fixtures/llm"

# 3. Build it.
t0=$(date +%s)
if ! make -C "$copy" -j"$JOBS" --no-print-directory all units >"$tmp/build.log" 2>&1; then
    tail -30 "$tmp/build.log"
    fail "make all units failed in the copy"
fi
echo "built the copy in $(( $(date +%s) - t0 )) s"

# 4. The tests that read fixtures, with every fixture path left to its
#    default. The unit binaries run from / to show that the path compiled
#    into them does not depend on the working directory.
failed=()
for t in test_provider test_sse; do
    if (cd / && env -u SB_FIXTURES "$copy/build/tests/$t" --jobs 1 >"$tmp/$t.log" 2>&1); then
        echo "ok    unit/$t"
    else
        tail -20 "$tmp/$t.log"
        failed+=("unit/$t")
    fi
done
for t in test_llm_fixtures.py test_runs_e2e.py; do
    if (cd "$copy" && env -u SB_FIXTURES SB_BIN="$copy/build/switchboard" SB_ROOT="$copy" \
            /usr/bin/python3 "tests/integration/$t" >"$tmp/$t.log" 2>&1); then
        echo "ok    integration/$t"
    else
        tail -30 "$tmp/$t.log"
        failed+=("integration/$t")
    fi
done

[ ${#failed[@]} -eq 0 ] || fail "in the standalone copy: ${failed[*]}"
echo "the repository stands alone"
