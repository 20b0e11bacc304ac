"""The `numalab top --html` page in a real browser: headless Chromium screenshots it, the PNG is checked.

Boots no VM, so it is not marked `lab`; it needs Debian's `chromium` (scripts/host-prep.sh installs it) and
fails, saying so, without it. The PNG is decoded with the standard library only (zlib + the five filters).
"""

import shutil
import struct
import subprocess
import zlib

import pytest

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


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB(A) bytes) of an 8-bit RGB or RGBA, non-interlaced PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height, depth, colour_type, _, _, interlace = struct.unpack(">IIBBBBB", data[16:29])
    assert (depth, colour_type, interlace) in ((8, 2, 0), (8, 6, 0)), (depth, colour_type, interlace)
    channels = 3 if colour_type == 2 else 4
    idat, offset = b"", 8
    while offset < len(data):
        (length,), kind = struct.unpack(">I", data[offset:offset + 4]), data[offset + 4:offset + 8]
        if kind == b"IDAT":
            idat += data[offset + 8:offset + 8 + length]
        offset += 12 + length
    raw, stride, rows, previous = zlib.decompress(idat), width * channels, [], bytes(width * channels)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up, corner = previous[i], previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
        rows.append(bytes(line))
        previous = line
    return width, height, [bytes(b for j in range(0, stride, channels) for b in row[j:j + 3]) for row in rows]


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
    width, height, rows = png_pixels(png.read_bytes())
    assert (width, height) == (WIDTH, HEIGHT)
    pixels = {row[i:i + 3] for row in rows for i in range(0, len(row), 3)}
    assert len(pixels) > 50, f"the screenshot is nearly one colour ({len(pixels)} colours)"
    # the picture itself was drawn: a pinned pod's CPU squares (24x24 each) show in its colour
    colour = bytes.fromhex(picture_colours(views)["default/pinned-a"][1:])
    painted = sum(row[i:i + 3] == colour for row in rows for i in range(0, len(row), 3))
    assert painted > 2 * 20 * 20, f"default/pinned-a's colour covers only {painted} pixels"
