#!/usr/bin/env python3
"""gpt-oss experts as HuggingFace transformers holds them, restated from its source (standard
library only): the independent oracle of tests/cli/gptoss-transformers.sh.

  gptoss_transformers.py dequantize MXFP4_DIR OUT_DIR
      OUT_DIR = MXFP4_DIR with every layer's experts.{gate_up,down}_proj_{blocks,scales}
      replaced by the float tensors transformers makes of them and saves (bf16):
      transformers/integrations/mxfp4.py, convert_moe_packed_tensors: blocks [E, R, G, 16]
      and E8M0 scales [E, R, G] -> per byte the low nibble first, FP4 (e2m1) value table
      (+0, .5, 1, 1.5, 2, 3, 4, 6, then the negatives), torch.ldexp(value, scale - 127),
      reshaped to [E, R, G*32] and then .transpose(1, 2): gate_up_proj [E, H, 2I] and
      down_proj [E, I, H], the shapes of transformers/models/gpt_oss/modeling_gpt_oss.py,
      GptOssExperts.__init__. config.json loses quantization_config (a bf16 checkpoint).
  gptoss_transformers.py check HF_DIR MLX_DIR
      MLX_DIR's float experts (tq-convert's output with the experts kept unquantized) hold
      exactly what GptOssExperts.forward computes with: x @ gate_up_proj, gate = [..., ::2],
      up = [..., 1::2], then @ down_proj; mlx-lm's SwitchLinear weight is [E, out, in], so
      gate_proj.weight[e][i][h] == gate_up_proj[e][h][2i], up_proj.weight[e][i][h] ==
      gate_up_proj[e][h][2i+1], down_proj.weight[e][h][i] == down_proj[e][i][h]; biases
      gate_up_proj_bias[e][2i] / [2i+1] and down_proj_bias as they are (mlx-lm
      mlx_lm/models/gpt_oss.py, sanitize: "gate_proj.bias" = v[..., ::2]).
"""
import json
import os
import shutil
import struct
import sys

FP4 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]
DT_SIZE = {"BF16": 2, "F16": 2, "F32": 4, "U8": 1}


def read_st(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
        data = f.read()
    meta = hdr.pop("__metadata__", None)
    return hdr, data, meta


def load_dir(d):
    tensors = {}
    for fn in sorted(os.listdir(d)):
        if fn.endswith(".safetensors"):
            hdr, data, _ = read_st(os.path.join(d, fn))
            for k, v in hdr.items():
                a, b = v["data_offsets"]
                tensors[k] = (v["dtype"], v["shape"], data[a:b])
    return tensors


def write_st(path, tensors):
    hdr, off, blobs = {}, 0, []
    for k in sorted(tensors):
        dt, shape, raw = tensors[k]
        hdr[k] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        blobs.append(raw)
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def f32_to_bf16_exact(v):
    b = struct.unpack("<I", struct.pack("<f", v))[0]
    if b & 0xFFFF:
        raise SystemExit("value %r is not exact in bf16" % v)
    return b >> 16


def bf16_words(raw):
    return struct.unpack("<%dH" % (len(raw) // 2), raw)


def dequantize(src, out):
    t = load_dir(src)
    res = {}
    for k, v in t.items():
        if k.endswith("_scales"):
            continue
        if not k.endswith("_blocks"):
            res[k] = v
            continue
        base = k[: -len("_blocks")]
        _, bshape, blocks = v
        _, sshape, scales = t[base + "_scales"]
        E, R, G, B = bshape
        assert B == 16 and sshape == [E, R, G]
        C = G * 32
        vals = [0.0] * (E * R * C)  # [E, R, C] as convert_moe_packed_tensors makes it
        for row in range(E * R * G):
            exp = scales[row] - 127
            for j in range(16):
                byte = blocks[row * 16 + j]
                vals[row * 32 + 2 * j] = FP4[byte & 15] * 2.0 ** exp
                vals[row * 32 + 2 * j + 1] = FP4[byte >> 4] * 2.0 ** exp
        words = [0] * (E * C * R)  # .transpose(1, 2): [E, C, R]
        for e in range(E):
            for r in range(R):
                for c in range(C):
                    words[(e * C + c) * R + r] = f32_to_bf16_exact(vals[(e * R + r) * C + c])
        res[base] = ("BF16", [E, C, R], struct.pack("<%dH" % len(words), *words))
    os.makedirs(out)
    write_st(os.path.join(out, "model.safetensors"), res)
    for fn in os.listdir(src):
        if fn.endswith(".safetensors") or fn.endswith(".index.json"):
            continue
        if fn == "config.json":
            c = json.load(open(os.path.join(src, fn)))
            c.pop("quantization_config", None)
            json.dump(c, open(os.path.join(out, fn), "w"), indent=2, sort_keys=True)
        elif os.path.isfile(os.path.join(src, fn)):
            shutil.copy(os.path.join(src, fn), os.path.join(out, fn))


def check(hf, mlx):
    h, m = load_dir(hf), load_dir(mlx)
    n = 0
    for k in sorted(h):
        if not k.endswith(".mlp.experts.gate_up_proj"):
            continue
        L = k[: -len("gate_up_proj")]
        dt, (E, H, I2), gu = h[k]
        _, (E2, I, H2), dn = h[L + "down_proj"]
        assert dt == "BF16" and E2 == E and H2 == H and I2 == 2 * I
        gu, dn = bf16_words(gu), bf16_words(dn)
        want = {"gate_proj": [0] * (E * I * H), "up_proj": [0] * (E * I * H), "down_proj": [0] * (E * H * I)}
        for e in range(E):
            for h_ in range(H):
                for i in range(I):
                    want["gate_proj"][(e * I + i) * H + h_] = gu[(e * H + h_) * I2 + 2 * i]
                    want["up_proj"][(e * I + i) * H + h_] = gu[(e * H + h_) * I2 + 2 * i + 1]
                    want["down_proj"][(e * H + h_) * I + i] = dn[(e * I + i) * H + h_]
        gb = bf16_words(h[L + "gate_up_proj_bias"][2])
        want_b = {"gate_proj": [gb[e * I2 + 2 * i] for e in range(E) for i in range(I)],
                  "up_proj": [gb[e * I2 + 2 * i + 1] for e in range(E) for i in range(I)],
                  "down_proj": list(bf16_words(h[L + "down_proj_bias"][2]))}
        for p in ("gate_proj", "up_proj", "down_proj"):
            if L + p + ".weight" not in m or L + p + ".bias" not in m:
                raise SystemExit("%s%s.weight/.bias: not in %s (mlx-lm's names)" % (L, p, mlx))
            dtw, shw, got = m[L + p + ".weight"]
            rows = H if p == "down_proj" else I
            cols = I if p == "down_proj" else H
            if dtw != "BF16" or shw != [E, rows, cols] or list(bf16_words(got)) != want[p]:
                raise SystemExit("%s%s.weight: %s %s differs from transformers' layout" % (L, p, dtw, shw))
            dtb, shb, gotb = m[L + p + ".bias"]
            if dtb != "BF16" or shb != [E, rows] or list(bf16_words(gotb)) != want_b[p]:
                raise SystemExit("%s%s.bias: %s %s differs from transformers' layout" % (L, p, dtb, shb))
            n += 2
    if not n:
        raise SystemExit("no transformers gpt-oss experts in %s" % hf)
    print("%d expert tensors equal transformers' GptOssExperts layout" % n)


if __name__ == "__main__":
    {"dequantize": dequantize, "check": check}[sys.argv[1]](sys.argv[2], sys.argv[3])
