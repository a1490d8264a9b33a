#!/usr/bin/env bash
# A first day in the browser UI (issue 21): providers and models in the
# New-session dialog and the header, the approval card above its tool card,
# long diff lines wrapped, SVG icons, the Bus tab's columns, archive and
# delete (tests/browser/test_providers.mjs), with test_browser.sh's setup
# and skips.
exec bash "$(dirname "$0")/test_browser.sh" test_providers.mjs
