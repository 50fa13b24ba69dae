"""A line plot written as a PNG with the standard library only (zlib), no matplotlib."""
import itertools
import math
import struct
import zlib
from collections.abc import Mapping, Sequence

# 5x7 bitmap glyphs for the few characters the labels use.
_FONT = {
    '0': '01110100011001110101110011000101110', '1': '00100011000010000100001000010001110',
    '2': '01110100010000100010001000100011111', '3': '11111000100010000010000011000101110',
    '4': '00010001100101010010111110001000010', '5': '11111100001111000001000011000101110',
    '6': '00110010001000011110100011000101110', '7': '11111000010001000100010000100001000',
    '8': '01110100011000101110100011000101110', '9': '01110100011000101111000010001001100',
    '.': '00000000000000000000000000110001100', 's': '00000000000111010000011100000111110',
    ' ': '0' * 35, '=': '00000000001111100000111110000000000',
    '-': '00000000000000011111000000000000000', '_': '00000000000000000000000000000011111',
    ':': '00000011000110000000011000110000000', 'q': '00000000000111110001011110000100001',
    'z': '00000000001111100010001000100011111', '+': '00000001000010011111001000010000000',
    'n': '00000000001011011001100011000110001', 'a': '00000000000111000001011111000101111',
    'b': '10000100001011011001100011000111110', 'o': '00000000000111010001100011000101110',
    'u': '00000000001000110001100011001101101', 'r': '00000000001011011001100001000010000',
    'j': '00010000000011000010000101001001100', 'e': '00000000000111010001111111000001110',
    'c': '00000000000111010000100001000101110', 't': '01000010001110001000010000100100110',
    'l': '01100001000010000100001000010001110', 'i': '00100000000110000100001000010001110',
    'm': '00000000001101010101101011000110001', 'y': '00000000001000110001011110000101110',
    '(': '00010001000100001000010000010000010', ')': '01000001000001000010000100010001000',
    'd': '00001000010110110011100011000101111', 'x': '00000000001000101010001000101010001',
    'p': '00000000001111010001111101000010000', 'g': '00000000000111110001011110000101110',
    'k': '10000100001001010100110001010010010', 'h': '10000100001011011001100011000110001',
    'f': '00110010010100011100010000100001000', 'w': '00000000001000110001101011010101010',
    'v': '00000000001000110001100010101000100', '/': '00000000010001000100010001000000000',
    '>': '01000001000001000001000100010001000', ',': '00000000000000000000001100010001000',
}


class Canvas:
    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.pixels = bytearray(b'\xff' * (width * height * 3))

    def dot(self, x: int, y: int, color: tuple[int, int, int]) -> None:
        if 0 <= x < self.width and 0 <= y < self.height:
            i = (y * self.width + x) * 3
            self.pixels[i:i + 3] = bytes(color)

    def line(self, start: tuple[int, int], end: tuple[int, int], color: tuple[int, int, int],
             thick: int = 1) -> None:
        (x0, y0), (x1, y1) = start, end
        steps = max(abs(x1 - x0), abs(y1 - y0), 1)
        for s in range(steps + 1):
            x, y = x0 + (x1 - x0) * s // steps, y0 + (y1 - y0) * s // steps
            for dx in range(-(thick // 2), thick // 2 + 1):
                for dy in range(-(thick // 2), thick // 2 + 1):
                    self.dot(x + dx, y + dy, color)

    def text(self, x: int, y: int, text: str, color: tuple[int, int, int] = (0, 0, 0),
             scale: int = 2) -> None:
        for ch in text:
            glyph = _FONT.get(ch.lower(), _FONT[' '])
            for row in range(7):
                for col in range(5):
                    if glyph[row * 5 + col] == '1':
                        for sx in range(scale):
                            for sy in range(scale):
                                self.dot(x + col * scale + sx, y + row * scale + sy, color)
            x += 6 * scale

    def png(self) -> bytes:
        raw = b''.join(b'\x00' + bytes(self.pixels[y * self.width * 3:(y + 1) * self.width * 3])
                       for y in range(self.height))

        def chunk(kind: bytes, data: bytes) -> bytes:
            return (struct.pack('>I', len(data)) + kind + data
                    + struct.pack('>I', zlib.crc32(kind + data) & 0xffffffff))
        header = struct.pack('>IIBBBBB', self.width, self.height, 8, 2, 0, 0, 0)
        return (b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', header)
                + chunk(b'IDAT', zlib.compress(raw, 9)) + chunk(b'IEND', b''))


BLACK, GRID = (0, 0, 0), (225, 225, 225)
COLORS = [(31, 119, 180), (214, 39, 40), (44, 160, 44), (148, 103, 189), (255, 127, 14)]


def _plottable(value: float | None) -> bool:
    return value is not None and math.isfinite(value) and value > 0


def plot(path: str, xs: Sequence[float], series: Mapping[str, Sequence[float | None]], *,
         title: str, xlabel: str, ylabel: str) -> None:
    """Lines of ``series`` over ``xs`` (log-scaled x and y), with a legend."""
    left, right, top, bottom = 110, 860, 70, 520
    legend = bottom + 80  # one line per series, under the x axis label
    c = Canvas(900, legend + 24 * len(series) + 10)
    values = [v for vs in series.values() for v in vs if _plottable(v)]
    ymin, ymax = math.log10(min(values) / 1.5), math.log10(max(values) * 1.5)
    xmin, xmax = math.log10(min(xs)), math.log10(max(xs))

    def px(x: float) -> int:
        return int(left + (math.log10(x) - xmin) / (xmax - xmin or 1) * (right - left))

    def py(y: float) -> int:
        return int(bottom - (math.log10(y) - ymin) / (ymax - ymin or 1) * (bottom - top))

    for exponent in range(math.floor(ymin), math.ceil(ymax) + 1):
        for m in (1, 2, 5):
            y = m * 10 ** exponent
            if ymin <= math.log10(y) <= ymax:
                c.line((left, py(y)), (right, py(y)), GRID)
                label = f"{y:g}s"
                c.text(left - 12 - 12 * len(label), py(y) - 7, label)
    c.line((left, bottom), (right, bottom), BLACK, 2)
    c.line((left, top), (left, bottom), BLACK, 2)
    for x in xs:
        c.line((px(x), bottom), (px(x), bottom + 6), BLACK)
        c.text(px(x) - 6 * len(f"{x:g}"), bottom + 12, f"{x:g}")
    c.text(left, 12, title, scale=3)
    c.text((left + right) // 2 - 6 * len(xlabel), bottom + 42, xlabel)
    c.text(10, top - 24, ylabel)
    for i, (name, ys) in enumerate(series.items()):
        color = COLORS[i % len(COLORS)]
        points = sorted((px(x), py(y)) for x, y in zip(xs, ys, strict=True) if _plottable(y))
        for start, end in itertools.pairwise(points):
            c.line(start, end, color, 3)
        for x, y in points:
            c.line((x - 4, y), (x + 4, y), color, 5)
        row = legend + 24 * i
        c.line((left + 20, row + 7), (left + 50, row + 7), color, 3)
        c.text(left + 58, row, name, color)
    with open(path, 'wb') as file:
        file.write(c.png())
