"""Headless Debian Chromium through Playwright for the page tests (never downloads a browser)."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@contextlib.contextmanager
def launch(**context_options) -> Iterator:
    """One Chromium for a test module, with a throwaway profile (times shown in UTC unless told)."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="sw-chromium-") as profile, sync_playwright() as p:
        options = {"timezone_id": "UTC", **context_options}
        ctx = p.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, args=ARGS, headless=True, **options
        )
        try:
            yield ctx
        finally:
            ctx.close()


@dataclass
class PageLog:
    """What the page did: console errors, uncaught exceptions, every request URL."""

    origin: str
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    @property
    def off_origin(self) -> list[str]:
        return [u for u in self.requests if not (u == self.origin or u.startswith(self.origin + "/"))]


@contextlib.contextmanager
def open_page(ctx, origin: str, *, color_scheme: str = "light", width: int = 1440, height: int = 900):
    """A new tab on `origin`/ that records errors and requests; closed afterwards."""
    page = ctx.new_page()
    page.set_viewport_size({"width": width, "height": height})
    page.emulate_media(color_scheme=color_scheme)
    log = PageLog(origin)
    page.on("console", lambda m: log.errors.append(m.text) if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: log.errors.append(f"uncaught: {e}"))
    page.on("request", lambda r: log.requests.append(r.url))
    try:
        page.goto(origin + "/")
        yield page, log
    finally:
        page.close()
