#!/usr/bin/env bash
# The Artifacts panel lists a session's files with previews, and attaches
# one (tests/browser/test_artifacts.mjs), with test_browser.sh's setup and skips.
exec bash "$(dirname "$0")/test_browser.sh" test_artifacts.mjs
