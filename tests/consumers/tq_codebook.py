#!/usr/bin/env python3
"""Helpers for tests/cli/convert-codebook.sh (standard library only, no tq code).

  tq_codebook.py relmse SRC DEQ NAME...     Σ(w-ŵ)²/Σw² over the named weights of SRC (F16/BF16/F32)
                                            against DEQ (tq-convert --dequantize --dtype f32),
                                            one line per name, then "all VALUE"
  tq_codebook.py codebook MODEL MODULE      MODULE.codebook's values, space-separated
  tq_codebook.py set-codebook MODEL MODULE V1,V2,...
                                            rewrite MODULE.codebook (F16) with these values (any
                                            count: the shape follows), in place
"""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from consumers import Model, read_st_header, write_st  # noqa: E402

FMT = {"F16": ("e", 2), "F32": ("f", 4), "BF16": (None, 2)}


def values(m, name):
    _, dt, _, _, _ = m.t[name]
    raw = m.bytes(name)
    if dt == "BF16":
        return [struct.unpack("<f", b"\0\0" + raw[i:i + 2])[0] for i in range(0, len(raw), 2)]
    c, sz = FMT[dt]
    return list(struct.unpack("<%d%s" % (len(raw) // sz, c), raw))


def main():
    cmd = sys.argv[1]
    if cmd == "relmse":
        src, deq = Model(sys.argv[2]), Model(sys.argv[3])
        te = ts = 0.0
        for name in sys.argv[4:]:
            w, d = values(src, name), values(deq, name)
            assert len(w) == len(d), name
            e = sum((a - b) ** 2 for a, b in zip(w, d))
            s = sum(a * a for a in w)
            print(name, e / s)
            te += e
            ts += s
        print("all", te / ts)
    elif cmd == "codebook":
        print(" ".join(repr(v) for v in values(Model(sys.argv[2]), sys.argv[3] + ".codebook")))
    elif cmd == "set-codebook":
        m, name = Model(sys.argv[2]), sys.argv[3] + ".codebook"
        vals = [float(v) for v in sys.argv[4].split(",")]
        path = m.t[name][0]
        tensors = {}
        for n, (p, dt, shape, b, e) in read_st_header(path).items():
            tensors[n] = (dt, shape, m.bytes(n))
        tensors[name] = ("F16", [len(vals)], struct.pack("<%de" % len(vals), *vals))
        with open(path, "rb") as f:
            import json
            meta = json.loads(f.read(struct.unpack("<Q", f.read(8))[0])).get("__metadata__")
        write_st(path, tensors, meta)
    else:
        sys.exit("unknown command " + cmd)


main()
