#!/usr/bin/env python3
"""Writes the seeds of tests/fuzz/corpus/gguf_blocks from GGUF files: for every block-type
tensor, one input in fuzz_gguf_blocks' form (type id byte, u32 first, u32 count, then at most
MAX bytes of the tensor's blocks, whole blocks only). The committed seeds were cut from
testdata/vectors/ggml-vectors.gguf and ggml-iq-vectors.gguf (blocks written by ggml's own
quantizers) and the bad-scale-*.gguf files of tests/fuzz/corpus/gguf.
Usage: make-gguf-blocks-corpus.py OUT_DIR FILE.gguf..."""
import os, struct, sys

MAX = 4096
# ggml type id -> (elements, bytes) per block: the block types tq dequantizes
BLOCK = {2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34), 10: (256, 84),
         11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210), 15: (256, 292),
         16: (256, 66), 17: (256, 74), 18: (256, 98), 19: (256, 50), 20: (32, 18),
         21: (256, 110), 22: (256, 82), 23: (256, 136), 29: (256, 56), 34: (256, 54),
         35: (256, 66), 39: (32, 17)}
VSIZE = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def tensors(path):
    b = open(path, "rb").read()
    if b[:4] != b"GGUF":
        return
    pos = 8
    nt, nkv = struct.unpack_from("<QQ", b, pos)
    pos += 16
    align = 32

    def string(p):
        n, = struct.unpack_from("<Q", b, p)
        return b[p + 8:p + 8 + n], p + 8 + n

    def value(t, p):
        if t == 8:
            return string(p)
        if t == 9:
            et, n = struct.unpack_from("<IQ", b, p)
            p += 12
            for _ in range(n):
                _, p = value(et, p)
            return None, p
        v = b[p:p + VSIZE[t]]
        return v, p + VSIZE[t]

    for _ in range(nkv):
        k, pos = string(pos)
        t, = struct.unpack_from("<I", b, pos)
        v, pos = value(t, pos + 4)
        if k == b"general.alignment":
            align = struct.unpack("<I", v)[0]
    info = []
    for _ in range(nt):
        name, pos = string(pos)
        nd, = struct.unpack_from("<I", b, pos)
        ne = struct.unpack_from("<%dQ" % nd, b, pos + 4)
        t, off = struct.unpack_from("<IQ", b, pos + 4 + 8 * nd)
        pos += 4 + 8 * nd + 12
        info.append((name.decode(errors="replace"), ne, t, off))
    start = (pos + align - 1) // align * align
    for name, ne, t, off in info:
        if t not in BLOCK:
            continue
        n = 1
        for x in ne:
            n *= x
        be, bb = BLOCK[t]
        nbytes = min(n // be * bb, MAX // bb * bb)
        blocks = b[start + off:start + off + nbytes]
        yield name, t, blocks[:len(blocks) // bb * bb]


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for path in sys.argv[2:]:
        stem = os.path.splitext(os.path.basename(path))[0]
        for name, t, blocks in tensors(path):
            if not blocks:
                continue
            nel = len(blocks) // BLOCK[t][1] * BLOCK[t][0]
            seed = bytes([t]) + struct.pack("<II", nel // 3, nel // 2) + blocks
            safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in name)
            with open(os.path.join(out, "%s-%s" % (stem, safe)), "wb") as f:
                f.write(seed)


main()
