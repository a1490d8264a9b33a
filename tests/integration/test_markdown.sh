#!/usr/bin/env bash
# gateway/ui/markdown.js against hostile model text in real Chromium
# (tests/browser/test_markdown.mjs): script tags, event handlers,
# javascript: and data: links, raw HTML, emphasis and bracket bombs; the
# DOM it builds holds nothing that runs code, and 1 MB of each shape
# renders in bounded time. test_browser.sh's setup and skips.
exec bash "$(dirname "$0")/test_browser.sh" test_markdown.mjs
