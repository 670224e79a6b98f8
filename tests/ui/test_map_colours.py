"""Theme colours (issue 45): the first ten themes get hues far enough apart to tell their dots apart (Vega's
category20 gave themes 0 and 1 two blues), every colour differs from the others, and the app's map colours each
theme as the report does, by its id."""

import itertools

import numpy as np
import pandas as pd

from prisma_core.names import NO_THEME_NAME
from prisma_core.pipeline.report.drawing import NO_THEME_COLOUR, PALETTE, theme_colour
from ui.map import map_chart

CATEGORY20 = ["#1f77b4", "#aec7e8", "#ff7f0e", "#ffbb78", "#2ca02c", "#98df8a", "#d62728", "#ff9896", "#9467bd"]


def lab(colour: str) -> np.ndarray:
    """CIELAB (D65) of an sRGB hex colour."""
    rgb = np.array([int(colour[i : i + 2], 16) / 255 for i in (1, 3, 5)])
    linear = np.where(rgb > 0.04045, ((rgb + 0.055) / 1.055) ** 2.4, rgb / 12.92)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ linear
    xyz /= np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > 0.008856, np.cbrt(xyz), 7.787 * xyz + 16 / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def hue_gap(a: str, b: str) -> float:
    """Degrees between the two colours' hues (CIELCh)."""
    hues = [np.degrees(np.arctan2(lab(c)[2], lab(c)[1])) % 360 for c in (a, b)]
    gap = abs(hues[0] - hues[1])
    return min(gap, 360 - gap)


def test_the_first_ten_theme_colours_have_hues_apart_and_all_twenty_differ():
    assert min(hue_gap(a, b) for a, b in itertools.combinations(PALETTE[:10], 2)) >= 15
    assert min(np.linalg.norm(lab(a) - lab(b)) for a, b in itertools.combinations(PALETTE, 2)) >= 14
    assert hue_gap(CATEGORY20[0], CATEGORY20[1]) < 15  # what the check catches: the former first two themes


def test_the_app_map_colours_each_theme_by_its_id_as_the_report_does():
    points = pd.DataFrame({"theme": ["Theme 3: c", "Theme 0: a", NO_THEME_NAME, "Theme 12: m"], "x": 0.0, "y": 0.0})
    scale = map_chart(points).to_dict()["encoding"]["color"]["scale"]
    assert dict(zip(scale["domain"], scale["range"], strict=True)) == {
        "Theme 0: a": theme_colour(0),
        "Theme 3: c": theme_colour(3),
        "Theme 12: m": theme_colour(12),
        NO_THEME_NAME: NO_THEME_COLOUR,
    }
