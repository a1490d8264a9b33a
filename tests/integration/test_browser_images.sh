#!/usr/bin/env bash
# An image pasted into the composer reaches the transcript and the model
# (tests/browser/test_images.mjs), with test_browser.sh's setup and skips.
exec bash "$(dirname "$0")/test_browser.sh" test_images.mjs
