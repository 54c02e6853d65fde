#!/usr/bin/env python3
"""MLX's affine quantization restated in standard-library Python, as an oracle for tq-convert
--method affine (no tq code). Every f32 operation is done in Python's double and rounded to
f32 (exact for +, -, *, / of f32 operands: a double holds the exact result to more than twice
f32's precision, so rounding it once more gives the correctly rounded f32 result).

The two rules are MLX's own (docs/quantization.md, MLX affine):
  gpu  the Metal kernel affine_quantize (mlx/backend/metal/kernels/quantized.h): the group
       minimum starts at the dtype's largest value, the maximum at 0; round() takes halfway
       cases away from zero; q = min(round(...), n_bins) stored as a byte
  cpu  quantize() of mlx/backend/cpu/quantized.cpp: min/max from +inf/-inf; rint() rounds
       halfway cases to even; q = clamp(rint(...), 0, n_bins)
Both compute q with the f32 scale and store scale and bias cast to the weight's dtype.

  mlx_affine.py check MODEL_IN MODEL_OUT RULE     every quantized module of MODEL_OUT (its
        P.weight U32 with P.scales and P.biases) must be MLX's quantization of MODEL_IN's
        P.weight with the bits and group size config.json gives (per-module entries too):
        words, scales and biases byte for byte. Prints the number of modules checked.
  mlx_affine.py dequant-check MODEL_Q MODEL_DEQ   tq-convert --dequantize --dtype f32 of
        MODEL_Q gave f32(f32(scale * q) + bias) for every weight
  mlx_affine.py vectors                            print the edge-case vectors of
        tests/unit/test_affine.c as C initializers
"""
import json
import math
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from consumers import Model  # noqa: E402


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def f32_bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def to_dtype_bits(x, dt):
    """f32 value -> stored bits in dtype dt (round to nearest, ties to even)"""
    if dt == "F32":
        return struct.pack("<f", x)
    if dt == "F16":
        return struct.pack("<e", x)  # IEEE half, round to nearest even
    if dt == "BF16":
        b = f32_bits(x)
        b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16
        return struct.pack("<H", b)
    raise ValueError(dt)


def from_dtype(raw, dt):
    if dt == "F32":
        return [v for (v,) in struct.iter_unpack("<f", raw)]
    if dt == "F16":
        return [v for (v,) in struct.iter_unpack("<e", raw)]
    if dt == "BF16":
        return [struct.unpack("<f", struct.pack("<I", v << 16))[0] for (v,) in struct.iter_unpack("<H", raw)]
    raise ValueError(dt)


def rint(x):  # ties to even
    return float(round(x))


def round_away(x):  # ties away from zero
    return math.copysign(math.floor(abs(x) + 0.5), x) if abs(x) < 2 ** 52 else x


DT_MAX = {"F32": 3.4028234663852886e38, "F16": 65504.0, "BF16": 3.3895313892515355e38}


def quantize_group(x, bits, rule, dt):
    """x: f32 values of one group -> (q list, f32 scale, f32 bias)"""
    n_bins = float((1 << bits) - 1)
    eps = f32(1e-7)
    if rule == "gpu":
        w_min, w_max = DT_MAX[dt], 0.0
        for v in x:
            w_min, w_max = min(w_min, v), max(w_max, v)
        rnd = round_away
    else:
        w_min, w_max = math.inf, -math.inf
        for v in x:
            w_max = v if w_max < v else w_max
            w_min = v if v < w_min else w_min
        rnd = rint
    scale = max(f32((w_max - w_min) / n_bins), eps)
    side = abs(w_min) > abs(w_max)
    scale = scale if side else -scale
    edge = w_min if side else w_max
    q0 = rnd(f32(edge / scale))
    bias = 0.0
    if q0 != 0:
        scale = f32(edge / q0)
        bias = edge
    q = []
    for v in x:
        r = rnd(f32(f32(v - bias) / scale))
        q.append(int(max(min(r, n_bins), 0.0)))
    return q, scale, bias


def quantize_row(vals, bits, group, rule, dt):
    words, scales, biases = [], b"", b""
    per = 32 // bits
    for g in range(0, len(vals), group):
        q, s, b = quantize_group(vals[g:g + group], bits, rule, dt)
        for k in range(0, group, per):
            w = 0
            for i in range(per):
                w |= q[k + i] << (i * bits)
            words.append(w)
        scales += to_dtype_bits(s, dt)
        biases += to_dtype_bits(b, dt)
    return struct.pack("<%dI" % len(words), *words), scales, biases


def module_params(cfg, module):
    q = cfg.get("quantization") or cfg.get("quantization_config") or {}
    m = q.get(module)
    if isinstance(m, dict):
        return m["bits"], m["group_size"]
    return q["bits"], q["group_size"]


def affine_modules(m):
    """(P, bits, group, scales dtype, scales shape) of every affine module of m"""
    for name in sorted(m.t):
        if name.endswith(".scales") and name[:-7] + ".biases" in m.t:
            bits, group = module_params(m.config, name[:-7])
            _, sdt, sshape, _, _ = m.t[name]
            yield name[:-7], bits, group, sdt, sshape


def check(model_in, model_out, rule):
    src, out = Model(model_in), Model(model_out)
    n = 0
    for P, bits, group, sdt, sshape in affine_modules(out):
        name = P + ".scales"
        rows = prod(sshape[:-1])
        cols = sshape[-1] * group
        wsrc = source_rows(src, P, rows, cols, sdt)
        words, scales, biases = out.bytes(P + ".weight"), out.bytes(name), out.bytes(P + ".biases")
        wb, sb = cols * bits // 8, sshape[-1] * len(to_dtype_bits(0.0, sdt))
        for r in range(rows):
            vals = wsrc(r)
            w, s, b = quantize_row(vals, bits, group, rule, sdt)
            if w != words[r * wb:(r + 1) * wb] or s != scales[r * sb:(r + 1) * sb] or b != biases[r * sb:(r + 1) * sb]:
                print("%s row %d differs from MLX's %s rule (bits %d, group %d)" % (P, r, rule, bits, group))
                return 1
        n += 1
    print("%d modules equal MLX's %s rule" % (n, rule))
    return 0 if n else 1


def prod(xs):
    p = 1
    for x in xs:
        p *= x
    return p


def source_rows(src, P, rows, cols, qdt):
    """row r of P.weight in the source (stacked, or per-expert HF names), as the f32 values MLX
    quantizes: cast to the scales' dtype first (the model's dtype after --dtype)"""
    def cast(vals, dt):
        if dt == qdt:
            return vals
        return from_dtype(b"".join(to_dtype_bits(v, qdt) for v in vals), qdt)
    if P + ".weight" in src.t:
        _, dt, _, _, _ = src.t[P + ".weight"]
        size = {"F32": 4, "F16": 2, "BF16": 2}[dt]
        return lambda r: cast(from_dtype(src.bytes(P + ".weight", r * cols * size, (r + 1) * cols * size), dt), dt)
    base, proj = P.split(".switch_mlp.")
    first = "%s.experts.0.%s.weight" % (base, proj)
    _, dt, shape, _, _ = src.t[first]
    size = {"F32": 4, "F16": 2, "BF16": 2}[dt]
    per = shape[0]

    def row(r):
        name = "%s.experts.%d.%s.weight" % (base, r // per, proj)
        k = r % per
        return cast(from_dtype(src.bytes(name, k * cols * size, (k + 1) * cols * size), dt), dt)
    return row


def dequant_check(model_q, model_d):
    """every affine module of model_q, dequantized in model_d (stacked or per-expert names, f32),
    equals f32(f32(scale * q) + bias) element for element"""
    q, d = Model(model_q), Model(model_d)
    n = 0
    for P, bits, group, sdt, sshape in affine_modules(q):
        scales = from_dtype(q.bytes(P + ".scales"), sdt)
        biases = from_dtype(q.bytes(P + ".biases"), sdt)
        words = [w for (w,) in struct.iter_unpack("<I", q.bytes(P + ".weight"))]
        per, mask = 32 // bits, (1 << bits) - 1
        want = []
        for i in range(len(words) * per):
            qv = (words[i // per] >> ((i % per) * bits)) & mask
            g = i // group
            want.append(f32(f32(scales[g] * qv) + biases[g]))
        if P + ".weight" in d.t:
            got = from_dtype(d.bytes(P + ".weight"), d.t[P + ".weight"][1])
        else:
            base, proj = P.split(".switch_mlp.")
            got = []
            for e in range(sshape[0]):
                k = "%s.experts.%d.%s.weight" % (base, e, proj)
                got += from_dtype(d.bytes(k), d.t[k][1])
        if got != want:
            print("%s: dequantized values differ from scale * q + bias" % P)
            return 1
        n += 1
    print("%d modules dequantize to scale * q + bias" % n)
    return 0 if n else 1


# Edge cases of tests/unit/test_affine.c: (label, bits, group, values)
def edge_cases():
    g = 32
    return [
        ("all_equal_pos", 4, g, [0.75] * g),
        ("all_equal_neg", 4, g, [-0.75] * g),
        ("all_zero", 4, g, [0.0] * g),
        ("one_outlier", 4, g, [0.0] * 7 + [100.0] + [0.0] * 24),
        ("negative_only", 4, g, [-1.0 - j / 32.0 for j in range(g)]),
        ("halfway", 4, g, [15.0, 0.0] + [0.5 + k for k in range(15)] + [float(k) for k in range(15)]),
        ("mixed_8bit", 8, g, [f32((j * 37 % 29 - 14) * 0.013) for j in range(g)]),
    ]


def vectors():
    for label, bits, group, vals in edge_cases():
        print("    /* %s */" % label)
        print("    {%d, %d, {%s}," % (bits, group, ", ".join("%rf" % f32(v) for v in vals)))
        for rule in ("gpu", "cpu"):
            w, s, b = quantize_row([f32(v) for v in vals], bits, group, rule, "F32")
            ws = struct.unpack("<%dI" % (len(w) // 4), w)
            print("     {{%s}, 0x%08xu, 0x%08xu}," % (", ".join("0x%08xu" % x for x in ws),
                                                     struct.unpack("<I", s)[0], struct.unpack("<I", b)[0]))
        print("    },")


def main(argv):
    if len(argv) == 5 and argv[1] == "check" and argv[4] in ("gpu", "cpu"):
        return check(argv[2], argv[3], argv[4])
    if len(argv) == 4 and argv[1] == "dequant-check":
        return dequant_check(argv[2], argv[3])
    if len(argv) == 2 and argv[1] == "vectors":
        vectors()
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
