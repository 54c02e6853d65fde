#!/usr/bin/python3
"""bench/kquant/kquant.py — a model's weights through ggml's reference K-quant quantizers, back to f32.

Usage: kquant.py LIBQ.so TYPE SRC_DIR OUT_DIR NAME...

LIBQ.so is ggml-quants.c (from a ggml checkout) built with bench/kquant/ggml_stubs.c; TYPE is q2_K,
q3_K or q4_K. Each named tensor of SRC_DIR/model.safetensors (bf16) is quantized with
quantize_row_TYPE_ref (what llama-quantize runs without an importance matrix) and dequantized
with dequantize_row_TYPE; OUT_DIR gets the whole model as f32 safetensors (other tensors
unchanged in value) with SRC_DIR's config and tokenizer, so tq-run decodes what llama.cpp's
weights of that type hold. Prints one JSON line: type, bits per weight of the named tensors,
relative MSE sum((w - w')^2) / sum(w^2) over them, and each tensor's. Needs numpy (Debian python3-numpy)."""
import ctypes
import json
import os
import shutil
import struct
import sys

import numpy as np

# bytes per 256-weight block (ggml-common.h: block_q2_K, block_q3_K, block_q4_K)
BLOCK = {"q2_K": 84, "q3_K": 110, "q4_K": 144}


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in hdr.items():
        if name == "__metadata__":
            continue
        if t["dtype"] != "BF16":
            sys.exit("kquant: %s: %s is %s, expected BF16" % (path, name, t["dtype"]))
        a, b = t["data_offsets"]
        u = np.frombuffer(data[a:b], dtype="<u2").astype(np.uint32) << 16
        out[name] = u.view(np.float32).reshape(t["shape"])
    return out


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        b = np.ascontiguousarray(tensors[name], dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)


def main():
    if len(sys.argv) < 6 or sys.argv[2] not in BLOCK:
        sys.exit(__doc__)
    lib = ctypes.CDLL(sys.argv[1])
    typ, src, dst, names = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
    quant = getattr(lib, "quantize_row_%s_ref" % typ)
    dequant = getattr(lib, "dequantize_row_%s" % typ)
    for fn in (quant, dequant):
        fn.restype = None
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    w = read_safetensors(os.path.join(src, "model.safetensors"))
    err = ref = 0.0
    nweights = nbytes = 0
    per = {}
    for name in names:
        x = np.ascontiguousarray(w[name], dtype=np.float32)
        if x.ndim != 2 or x.shape[1] % 256:
            sys.exit("kquant: %s: shape %s: rows must be a multiple of 256 weights" % (name, list(x.shape)))
        k = x.size
        q = ctypes.create_string_buffer(k // 256 * BLOCK[typ])
        y = np.empty_like(x)
        quant(x.ctypes.data, q, k)
        dequant(q, y.ctypes.data, k)
        d = (x.astype(np.float64) - y.astype(np.float64))
        e1, r1 = float((d * d).sum()), float((x.astype(np.float64) ** 2).sum())
        per[name] = e1 / r1
        err += e1
        ref += r1
        nweights += k
        nbytes += len(q.raw)
        w[name] = y
    os.makedirs(dst, exist_ok=True)
    write_safetensors(os.path.join(dst, "model.safetensors"), w)
    for f in sorted(os.listdir(src)):
        if f.endswith(".json"):
            shutil.copyfile(os.path.join(src, f), os.path.join(dst, f))
    print(json.dumps({"type": typ, "bits_per_weight": 8.0 * nbytes / nweights, "rel_mse": err / ref,
                      "tensors": len(names), "per_tensor_rel_mse": per}, sort_keys=True))


if __name__ == "__main__":
    main()
