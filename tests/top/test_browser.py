"""The `numalab top --html` page in a real browser: headless Chromium screenshots it, the PNG is checked.

Boots no VM, so it is not marked `lab`; it needs Debian's `chromium` (scripts/host-prep.sh installs it) and
fails, saying so, without it. The PNG is read with Pillow.
"""

import shutil
import subprocess

import pytest
from PIL import Image

from numalab.top.colours import picture_colours
from numalab.top.model import build_views
from numalab.top.page import render_html
from tests.top.fakes import sample_cluster

BROWSERS = ("chromium", "chromium-browser", "google-chrome")
WIDTH, HEIGHT = 1200, 900


def chromium() -> str:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    pytest.fail("no chromium on PATH: install Debian's `chromium` package (scripts/host-prep.sh does) "
                "to screenshot the numalab top page")


def test_chromium_screenshot_of_the_page(tmp_path):
    browser = chromium()
    views = build_views(*sample_cluster())
    page, png = tmp_path / "top.html", tmp_path / "top.png"
    page.write_text(render_html(views), encoding="utf-8")
    argv = [browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}", f"--window-size={WIDTH},{HEIGHT}",
            f"--screenshot={png}", page.as_uri()]
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "XDG_CACHE_HOME": str(tmp_path / "cache")}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=180, env=env, check=False)
    assert png.is_file(), f"{' '.join(argv)} wrote no screenshot (exit {done.returncode}): {done.stderr[-2000:]}"
    with Image.open(png) as image:
        assert (image.format, image.size) == ("PNG", (WIDTH, HEIGHT))
        counts = {colour: count for count, colour in image.convert("RGB").getcolors(WIDTH * HEIGHT)}
    assert len(counts) > 50, f"the screenshot is nearly one colour ({len(counts)} colours)"
    # the picture itself was drawn: a pinned pod's CPU squares (24x24 each) show in its colour
    colour = tuple(bytes.fromhex(picture_colours(views)["default/pinned-a"][1:]))
    painted = counts.get(colour, 0)
    assert painted > 2 * 20 * 20, f"default/pinned-a's colour covers only {painted} pixels"
