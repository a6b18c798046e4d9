"""A loss-curve PNG with no plotting library: a small rasterizer, a 3x5 digit font, zlib and struct."""
import struct
import zlib

import numpy as np

_GLYPHS = {  # 3x5 pixel digits and a few signs, rows top to bottom
    "0": "111101101101111", "1": "010110010010111", "2": "111001111100111", "3": "111001111001111",
    "4": "101101111001001", "5": "111100111001111", "6": "111100111101111", "7": "111001001001001",
    "8": "111101111101111", "9": "111101111001111", ".": "000000000000010", "-": "000000111000000",
    " ": "000000000000000", "k": "100101110101101", "l": "100100100100111", "o": "000111101101111",
    "s": "000111110011111", "t": "010111010010011", "e": "000111111100111", "p": "000111101111100",
    "v": "000101101101010", "a": "000011101101011", "i": "010000010010010", "n": "000110101101101",
    "r": "000101110100100",
}
_COLORS = [(31, 119, 180), (214, 39, 40), (44, 160, 44)]


def _text(img, x, y, s, scale=2, color=(0, 0, 0)):
    for ch in s:
        bits = _GLYPHS.get(ch, _GLYPHS[" "])
        for r in range(5):
            for c in range(3):
                if bits[r * 3 + c] == "1":
                    img[y + r * scale:y + (r + 1) * scale, x + c * scale:x + (c + 1) * scale] = color
        x += 4 * scale


def _line(img, x0, y0, x1, y1, color):
    n = int(max(abs(x1 - x0), abs(y1 - y0))) + 1
    xs = np.linspace(x0, x1, n).round().astype(int)
    ys = np.linspace(y0, y1, n).round().astype(int)
    h, w = img.shape[:2]
    ok = (xs >= 0) & (xs < w) & (ys >= 0) & (ys < h)
    for dy in (0, 1):
        img[np.clip(ys[ok] + dy, 0, h - 1), xs[ok]] = color


def _fmt(v):
    return f"{v:.2f}" if abs(v) < 100 else f"{v:.0f}"


def render(series, width=720, height=440):
    """An RGB image of named (xs, ys) series on shared axes, with numeric tick labels."""
    img = np.full((height, width, 3), 255, np.uint8)
    left, right, top, bottom = 70, 20, 20, 60
    xs_all = np.concatenate([np.asarray(x, float) for x, _ in series.values()])
    ys_all = np.concatenate([np.asarray(y, float) for _, y in series.values()])
    x0, x1 = float(xs_all.min()), float(max(xs_all.max(), xs_all.min() + 1))
    y0, y1 = float(ys_all.min()), float(ys_all.max())
    if y1 - y0 < 1e-9:
        y0, y1 = y0 - 0.5, y1 + 0.5
    pw, ph = width - left - right, height - top - bottom

    def px(x, y):
        return left + (x - x0) / (x1 - x0) * pw, top + (y1 - y) / (y1 - y0) * ph

    for i in range(5):  # grid and tick labels
        yv = y0 + (y1 - y0) * i / 4
        _, yp = px(x0, yv)
        _line(img, left, yp, left + pw, yp, (225, 225, 225))
        _text(img, 4, int(yp) - 5, _fmt(yv))
        xv = x0 + (x1 - x0) * i / 4
        xp, _ = px(xv, y0)
        _text(img, int(xp) - 10, top + ph + 10, f"{xv:.0f}")
    _line(img, left, top, left, top + ph, (0, 0, 0))
    _line(img, left, top + ph, left + pw, top + ph, (0, 0, 0))
    _text(img, left + pw // 2 - 16, top + ph + 26, "step", scale=2)
    for i, (color, name) in enumerate(zip(_COLORS, series)):  # legend, top right
        y = top + 8 + 16 * i
        img[y:y + 10, left + pw - 140:left + pw - 130] = color
        _text(img, left + pw - 124, y, name.lower())
    for color, (xs, ys) in zip(_COLORS, series.values()):
        pts = [px(x, y) for x, y in zip(xs, ys)]
        for (a, b), (c, d) in zip(pts, pts[1:]):
            _line(img, a, b, c, d, color)
        for a, b in pts if len(pts) < 40 else []:
            img[int(b) - 2:int(b) + 3, int(a) - 2:int(a) + 3] = color
    return img


def write_png(path, img):
    """Write an (h, w, 3) uint8 image as a PNG."""
    h, w, _ = img.shape
    raw = b"".join(b"\x00" + img[r].tobytes() for r in range(h))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b"")
    with open(path, "wb") as f:
        f.write(png)


def loss_curve(path, series):
    """Plot {"train": (steps, losses), "val": (steps, losses)} to a PNG (blue, red, green in that order)."""
    write_png(path, render(series))
