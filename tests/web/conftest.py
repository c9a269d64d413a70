"""The browser of the dashboard's browser tests: Debian's chromium, headless, driven by
Playwright (never a browser Playwright downloads). Where chromium is missing they skip
with that reason; OPSRUNNER_TEST_BROWSER=require (.ci/run) makes it a failure."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")


def _unavailable(reason: str) -> None:
    if os.environ.get("OPSRUNNER_TEST_BROWSER") == "require":
        pytest.fail(f"browser required (OPSRUNNER_TEST_BROWSER=require) but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        _unavailable(f"{CHROMIUM} is missing (sh tests/setup_browser.sh installs Debian's chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        _unavailable(f"playwright is not installed ({exc}; it is in the test extra)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context()
    tab = context.new_page()
    try:
        yield tab
    finally:
        context.close()
