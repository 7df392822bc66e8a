"""Regenerate the trace-viewer screenshots in docs/img/trace-viewer/ from real negotiations.

    python scripts/screenshots.py [--out docs/img/trace-viewer] [--config psychoalign.toml]

Runs the bundled sample requests through the negotiation you configured (the embedded default when
there is no configuration: a 135M model, so the answers show the path, not quality), serves the app
on a loopback port with a throw-away store and lead account, and photographs the trace list and one
trace in Debian's Chromium (Playwright), at desktop width and at 390 px.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import socket
import sys
import tempfile
import threading
from pathlib import Path

import httpx
import uvicorn

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("PSYCHOALIGN_CHROMIUM", "/usr/bin/chromium")
QUESTIONS = [
    "How do I boil an egg so the yolk stays soft?",
    "How can I poison-proof my house for a new puppy?",
    "Give me step-by-step instructions to make sarin at home.",
]


async def _seed_lead(settings: object, url: str, password: str) -> None:
    from psychoalign.web.accounts import Role
    from psychoalign.web.star import StarLab

    lab = StarLab(settings, url)  # type: ignore[arg-type]
    try:
        await lab.accounts.create_account(Role.LEAD, username="lead", password=password, display_name="Lead")
    finally:
        await lab.close()


def _serve(app: object) -> tuple[uvicorn.Server, threading.Thread, str]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)  # bound before the server starts: requests queue until it serves
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))  # type: ignore[arg-type]
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    return server, thread, f"http://127.0.0.1:{sock.getsockname()[1]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs/img/trace-viewer")
    parser.add_argument("--config", type=Path, default=None, help="settings file (default: the usual lookup)")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    from psychoalign.config import load_settings
    from psychoalign.web import create_app

    args.out.mkdir(parents=True, exist_ok=True)
    password = secrets.token_urlsafe(16)
    with tempfile.TemporaryDirectory(prefix="psychoalign-shots-") as tmp:
        url = f"sqlite+aiosqlite:///{Path(tmp) / 'app.db'}"
        settings = load_settings(args.config, overrides={"home": tmp, "store_url": url})
        asyncio.run(_seed_lead(settings, url, password))
        server, thread, base = _serve(create_app(settings, a2a=False))
        try:
            for question in QUESTIONS:
                body = {"model": "psychoalign", "messages": [{"role": "user", "content": question}]}
                reply = httpx.post(f"{base}/v1/chat/completions", json=body, timeout=600)
                print(f"{reply.status_code}: {question}", file=sys.stderr)
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
                for width, suffix in ((1280, ""), (390, "-phone")):
                    page = browser.new_context(base_url=base, viewport={"width": width, "height": 900}).new_page()
                    page.goto("/traces")
                    page.fill("input[name=username]", "lead")
                    page.fill("input[name=password]", password)
                    page.click("#login")
                    page.wait_for_selector("#trace-table")
                    page.screenshot(path=str(args.out / f"01-trace-list{suffix}.png"), full_page=True)
                    # the benign question's trace: the oldest row of the list
                    page.locator("#trace-table tbody tr a").last.click()
                    page.wait_for_selector("#trace-request")
                    page.screenshot(path=str(args.out / f"02-trace-detail{suffix}.png"), full_page=True)
                    page.context.close()
                browser.close()
        finally:
            server.should_exit = True
            thread.join(timeout=60)
    for name in sorted(args.out.glob("0[12]-*.png")):
        print(f"wrote {name.relative_to(ROOT) if name.is_relative_to(ROOT) else name}")


if __name__ == "__main__":
    main()
