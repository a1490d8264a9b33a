#!/usr/bin/env bash
# docs/protocol.md is generated from the schema tables; a stale copy fails here
# (regenerate it with `make docs`).
set -u
diff -u "$SB_ROOT/docs/protocol.md" <("$SB_BIN" schemas --markdown) > /tmp/sb-docs-diff.$$ 2>&1
rc=$?
if [ $rc -ne 0 ]; then
    head -40 /tmp/sb-docs-diff.$$
    echo "docs/protocol.md is stale: run make docs"
fi
rm -f /tmp/sb-docs-diff.$$
exit $rc
