"""The loss-curve PNG: drawn by matplotlib where it is installed (the `[plot]` extra), else by a small
built-in rasterizer (a 5x7 pixel font, zlib and struct) with the same content: round-number ticks,
axis labels, a legend, each series as a line (with markers when it has few points), reference lines."""
import math
import struct
import zlib

import numpy as np

WIDTH, HEIGHT = 720, 440
_COLORS = [(31, 119, 180), (214, 39, 40), (44, 160, 44), (120, 120, 120)]

_FONT = {  # 5x7 pixel glyphs, rows top to bottom
    "0": "01110100011001110101110011000101110", "1": "00100011000010000100001000010001110",
    "2": "01110100010000100010001000100011111", "3": "11110000010000101110000010000111110",
    "4": "00010001100101010010111110001000010", "5": "11111100001111000001000011000101110",
    "6": "00110010001000011110100011000101110", "7": "11111000010001000100010000100001000",
    "8": "01110100011000101110100011000101110", "9": "01110100011000101111000010001001100",
    ".": "00000000000000000000000000110001100", "-": "00000000000000011111000000000000000",
    " ": "00000000000000000000000000000000000", "a": "00000000000111000001011111000101111",
    "b": "10000100001011011001100011000111110", "c": "00000000000111010000100001000101110",
    "e": "00000000000111010001111111000001110", "g": "00000011111000110001011110000101110",
    "h": "10000100001011011001100011000110001", "i": "00100000000110000100001000010001110",
    "l": "01100001000010000100001000010001110", "m": "00000000001101010101101011000110001",
    "n": "00000000001011011001100011000110001", "o": "00000000000111010001100011000101110",
    "p": "00000000001111010001111101000010000", "r": "00000000001011011001100001000010000",
    "s": "00000000000111110000011100000111110", "t": "01000010001110001000010000100100110",
    "u": "00000000001000110001100011001101101", "v": "00000000001000110001100010101000100",
    "y": "00000000001000110001011110000101110", "(": "00010001000100001000010000010000010",
    ")": "01000001000001000010000100010001000", "/": "00000000010001000100010001000000000",
}


def nice_ticks(lo, hi, count=6):
    """Round-number ticks (steps of 1, 2 or 5 times a power of ten) covering [lo, hi]."""
    if hi <= lo:
        hi = lo + 1.0
    power = 10.0 ** math.floor(math.log10((hi - lo) / max(count - 1, 1)))

    def ticks_with(step):
        return math.ceil(hi / step - 1e-9) - math.floor(lo / step + 1e-9) + 1

    step = min((m * power for m in (1, 2, 5, 10)), key=lambda st: abs(ticks_with(st) - count))
    first = math.floor(lo / step + 1e-9) * step
    ticks = []
    v = first
    while v < hi + step * 0.999:
        ticks.append(round(v, 12))
        v += step
    return ticks, step


def _label(v, step):
    decimals = max(0, -math.floor(math.log10(step) + 1e-9))
    return f"{v:.{decimals}f}"


def _text_image(s, scale=2, color=(0, 0, 0)):
    """A transparent-background RGBA strip with `s` drawn in the 5x7 font."""
    img = np.zeros((7 * scale, 6 * scale * max(len(s), 1), 4), np.uint8)
    for i, ch in enumerate(s):
        bits = _FONT.get(ch, _FONT[" "])
        for r in range(7):
            for c in range(5):
                if bits[r * 5 + c] == "1":
                    img[r * scale:(r + 1) * scale, (6 * i + c) * scale:(6 * i + c + 1) * scale] = (*color, 255)
    return img


def _blit(img, strip, x, y):
    h, w = strip.shape[:2]
    x, y = int(x), int(y)
    if x < 0 or y < 0 or y + h > img.shape[0] or x + w > img.shape[1]:
        return
    region = img[y:y + h, x:x + w]
    mask = strip[..., 3] > 0
    region[mask] = strip[..., :3][mask]


def _line(img, x0, y0, x1, y1, color, width=2, dash=0):
    n = int(max(abs(x1 - x0), abs(y1 - y0))) + 1
    xs = np.linspace(x0, x1, n).round().astype(int)
    ys = np.linspace(y0, y1, n).round().astype(int)
    if dash:
        keep = (np.arange(n) // dash) % 2 == 0
        xs, ys = xs[keep], ys[keep]
    h, w = img.shape[:2]
    for dy in range(width):
        ok = (xs >= 0) & (xs < w) & (ys + dy >= 0) & (ys + dy < h)
        img[ys[ok] + dy, xs[ok]] = color


def render(series, xlabel="step", ylabel="loss", references=None, width=WIDTH, height=HEIGHT):
    """An RGB image of named (xs, ys) series on shared axes, and horizontal {name: y} reference lines."""
    references = references or {}
    img = np.full((height, width, 3), 255, np.uint8)
    left, right, top, bottom = 84, 32, 24, 64
    pw, ph = width - left - right, height - top - bottom
    xs_all = np.concatenate([np.asarray(x, float) for x, _ in series.values()])
    ys_all = np.concatenate([np.asarray(y, float) for _, y in series.values()] + [list(references.values())])
    xticks, xstep = nice_ticks(min(0.0, xs_all.min()), xs_all.max())
    yticks, ystep = nice_ticks(ys_all.min(), ys_all.max())
    x0, x1, y0, y1 = xticks[0], xticks[-1], yticks[0], yticks[-1]

    def px(x, y):
        return left + (x - x0) / (x1 - x0) * pw, top + (y1 - y) / (y1 - y0) * ph

    for yv in yticks:
        _, yp = px(x0, yv)
        _line(img, left, yp, left + pw, yp, (228, 228, 228), width=1)
        strip = _text_image(_label(yv, ystep))
        _blit(img, strip, left - 8 - strip.shape[1], yp - strip.shape[0] // 2)
    for xv in xticks:
        xp, _ = px(xv, y0)
        _line(img, xp, top, xp, top + ph, (240, 240, 240), width=1)
        strip = _text_image(_label(xv, xstep))
        _blit(img, strip, xp - strip.shape[1] // 2, top + ph + 8)
    _line(img, left, top, left, top + ph, (0, 0, 0))
    _line(img, left, top + ph, left + pw, top + ph, (0, 0, 0))
    strip = _text_image(xlabel)
    _blit(img, strip, left + pw // 2 - strip.shape[1] // 2, top + ph + 34)
    strip = np.rot90(_text_image(ylabel))
    _blit(img, strip, 12, top + ph // 2 - strip.shape[0] // 2)
    names = list(series) + list(references)
    lx = left + pw - 48 - max(_text_image(n).shape[1] for n in names)
    for i, name in enumerate(names):  # legend, top right
        color = _COLORS[i % len(_COLORS)]
        y = top + 10 + 20 * i
        _line(img, lx, y + 6, lx + 24, y + 6, color, dash=6 if name in references else 0)
        _blit(img, _text_image(name), lx + 32, y)
    for i, (xs, ys) in enumerate(series.values()):
        color = _COLORS[i % len(_COLORS)]
        pts = [px(x, y) for x, y in zip(xs, ys)]
        for (a, b), (c, d) in zip(pts, pts[1:]):
            _line(img, a, b, c, d, color)
        for a, b in pts if len(pts) < 40 else []:
            img[int(b) - 3:int(b) + 4, int(a) - 3:int(a) + 4] = color
    for i, value in enumerate(references.values(), start=len(series)):
        _, yp = px(x0, value)
        _line(img, left, yp, left + pw, yp, _COLORS[i % len(_COLORS)], dash=8)
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


def _matplotlib(path, series, xlabel, ylabel, references, title):
    """Draw with matplotlib's object API (no pyplot: the process's backend and figures are untouched)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(WIDTH / 100, HEIGHT / 100), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    colors = ["#%02x%02x%02x" % c for c in _COLORS]
    for i, (name, (xs, ys)) in enumerate(series.items()):
        ax.plot(xs, ys, label=name, color=colors[i % 4], marker="o" if len(xs) < 40 else None, markersize=4)
    for i, (name, value) in enumerate(references.items(), start=len(series)):
        ax.axhline(value, label=name, color=colors[i % 4], linestyle="--", linewidth=1)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, format="png")


def have_matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def loss_curve(path, series, references=None, xlabel="step", ylabel="loss (nats/char)", title=None,
               engine="auto"):
    """Plot {"train loss": (steps, losses), "val loss": (steps, losses)} (and dashed {name: y} reference
    lines) to a PNG of 720x440 pixels. `engine`: "matplotlib", "builtin", or "auto" (matplotlib if
    installed). Returns the engine used."""
    references = references or {}
    if engine == "auto":
        engine = "matplotlib" if have_matplotlib() else "builtin"
    if engine == "matplotlib":
        _matplotlib(path, series, xlabel, ylabel, references, title)
    elif engine == "builtin":
        write_png(path, render(series, xlabel, ylabel, references))
    else:
        raise ValueError(f"loss_curve: engine must be 'auto', 'matplotlib' or 'builtin', got {engine!r}")
    return engine
