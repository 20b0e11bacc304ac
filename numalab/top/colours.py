"""Pod colours for the `numalab top` picture and page.

A pod's colour comes from a hash of its name, so it is the same on every node and in every picture, unless
a pod of a too similar colour is in the same picture: then the one later by name takes another, so that a
picture of a handful of pods never shows two look-alikes.
"""

from __future__ import annotations

import colorsys
import hashlib
from collections.abc import Iterable

from numalab.top.model import NodeView

HUES, MIN_HUE_APART = 18, 45


def _palette() -> tuple[tuple[int, str], ...]:
    """(hue in degrees, colour): 18 hues 20° apart, lightness cycling so neighbours differ; listed 140° apart
    so that walking the list from any entry meets distant hues first."""
    colours = []
    for k in range(HUES):
        i = (k * 7) % HUES
        red, green, blue = colorsys.hls_to_rgb(i / HUES, (0.40, 0.58, 0.49)[i % 3], 0.72)
        colours.append((i * 360 // HUES, f"#{round(red * 255):02x}{round(green * 255):02x}{round(blue * 255):02x}"))
    return tuple(colours)


PALETTE = _palette()


def _start(pod: str) -> int:
    return int.from_bytes(hashlib.sha256(pod.encode()).digest()[:4], "big") % len(PALETTE)


def pod_colour(pod: str) -> str:
    """A pod's own colour: the palette entry its name's SHA-256 picks, the same in every picture."""
    return PALETTE[_start(pod)][1]


def pod_colours(pods: Iterable[str]) -> dict[str, str]:
    """Colours for the pods of one picture, by name order: a pod keeps its own colour unless its hue is within
    45° of one already given, then takes the next entry that is not (else the next unused, else its own).
    The same set of pods always gets the same colours, and a small picture never shows two look-alikes."""
    given: dict[str, str] = {}
    hues: list[int] = []
    for pod in sorted(set(pods)):
        walk = [PALETTE[(_start(pod) + k) % len(PALETTE)] for k in range(len(PALETTE))]
        apart = [entry for entry in walk if all(_hue_distance(entry[0], hue) >= MIN_HUE_APART for hue in hues)]
        unused = [entry for entry in walk if entry[1] not in given.values()]
        hue, colour = (apart or unused or walk)[0]
        given[pod] = colour
        hues.append(hue)
    return given


def _hue_distance(a: int, b: int) -> int:
    return min((a - b) % 360, (b - a) % 360)


def picture_colours(views: list[NodeView]) -> dict[str, str]:
    """Every pod a picture shows (allocation entries and cell holds), coloured once for SVG and table alike."""
    return pod_colours([hold.allocation.pod for view in views for hold in view.pods]
                       + [hold.pod for view in views for cell in view.cells for hold in cell.holds])


def ink_on(fill: str) -> str:
    """Black or white text, whichever reads on the fill."""
    red, green, blue = (int(fill[i:i + 2], 16) / 255 for i in (1, 3, 5))
    return "#111827" if 0.299 * red + 0.587 * green + 0.114 * blue > 0.6 else "#ffffff"
