#!/usr/bin/python3
"""bench/kquant/kquant.py — a model's weights through ggml's own quantizers, typed as llama-quantize types them, back to f32.

Usage: kquant.py LIBQ.so SPEC SRC_DIR OUT_DIR NAME...

LIBQ.so is ggml-quants.c (from a ggml checkout) built with bench/kquant/ggml_stubs.c. SPEC is
either a ggml type as ggml spells it (q2_K, q3_K, q4_K, q5_K, q6_K, iq3_s, iq4_xs, iq4_nl,
q4_0, q5_0, q5_1, q8_0): every named tensor gets that type, as `llama-quantize --pure` does;
or a llama.cpp file type as llama-quantize spells it (Q2_K, Q3_K_M, Q4_K_M, IQ3_S, IQ4_XS):
each named tensor gets the type llama.cpp's mix rules choose for it (mix_type below, a port
of llama_tensor_get_type_impl for those file types). Either way a tensor whose rows are not
whole blocks of its type gets llama.cpp's fallback type (tensor_type_fallback), as
llama-quantize does with or without --pure. No importance matrix.

Each named tensor of SRC_DIR/model.safetensors (bf16) is quantized with quantize_TYPE (what
ggml_quantize_chunk calls, imatrix NULL, after ggml_quantize_init's table set-up for iq3_s) and
dequantized with dequantize_row_TYPE; OUT_DIR gets the whole model as f32 safetensors (other
tensors unchanged in value) with SRC_DIR's config and tokenizer, so tq-run decodes what
llama.cpp's weights of those types hold. A NAME may be an fnmatch pattern
(model.layers.0.mlp.experts.*.down_proj.weight) standing for every tensor it matches. Prints
one JSON line: the spec, bits per weight of the named tensors (the bytes quantize_TYPE wrote
over their weights), relative MSE sum((w - w')^2) / sum(w^2) over them, how many weights each
type got, and each tensor's type and relative MSE. Needs numpy (Debian python3-numpy)."""
import collections
import ctypes
import fnmatch
import json
import os
import re
import shutil
import struct
import sys

import numpy as np

# weights per block (ggml.c type_traits blck_size: QK_K = 256, QK4_0 ... QK8_0 = 32)
BLOCK = {"q4_0": 32, "q5_0": 32, "q5_1": 32, "q8_0": 32, "iq4_nl": 32,
         "q2_K": 256, "q3_K": 256, "q4_K": 256, "q5_K": 256, "q6_K": 256, "iq3_s": 256, "iq4_xs": 256}

# llama.cpp src/llama-quant.cpp, llama_ftype_get_default_type: a file type's base type
FTYPE_DEFAULT = {"Q2_K": "q2_K", "Q3_K_M": "q3_K", "Q4_K_M": "q4_K", "IQ3_S": "iq3_s", "IQ4_XS": "iq4_xs"}

# llama.cpp src/llama-quant.cpp, tensor_type_fallback: the type a tensor gets when its rows
# (ggml's ne[0], the input dimension) are not whole blocks of the chosen type
FALLBACK = {"iq3_s": "iq4_nl", "iq4_xs": "iq4_nl", "q2_K": "q4_0", "q3_K": "q4_0",
            "q4_K": "q5_0", "q5_K": "q5_1", "q6_K": "q8_0"}


def category(name):
    """llama.cpp's tensor_get_category, on the HuggingFace name of the GGUF tensor it becomes."""
    if name == "lm_head.weight":
        return "output"
    if name == "model.embed_tokens.weight":
        return "token_embd"
    for hf, cat in ((".self_attn.v_proj.", "attn_v"), (".self_attn.k_proj.", "attn_k"),
                    (".self_attn.q_proj.", "attn_q"), (".self_attn.o_proj.", "attn_output"),
                    ("up_proj.", "ffn_up"), ("gate_proj.", "ffn_gate"), ("down_proj.", "ffn_down")):
        if hf in name:
            return cat
    return "other"


def mix_type(ftype, name, ncols, n_layer, n_expert, n_gqa):
    """The type llama_tensor_get_type_impl (llama.cpp src/llama-quant.cpp, read at ggml-org/llama.cpp
    007dbbf3) gives tensor NAME in a file of type FTYPE, for the five file types above, no
    importance matrix, no --pure, no overrides, arch qwen3/qwen3moe (not Falcon, not a 70B).
    Its counters i_attention_wv and i_ffn_down count attn_v / ffn_down tensors in the loader's
    order (layer by layer): with one such tensor per layer, as in a GGUF (experts stacked), both
    equal the layer index, and n_attention_wv = n_layer."""
    cat = category(name)
    t = FTYPE_DEFAULT[ftype]
    m = re.search(r"\.layers\.(\d+)\.", name)
    i = int(m.group(1)) if m else -1

    def use_more_bits(i_layer, n):
        return i_layer < n // 8 or i_layer >= 7 * n // 8 or (i_layer - n // 8) % 3 == 2

    if cat == "output":  # untied output: Q6_K unless its rows are not whole blocks of the base type
        return "q8_0" if ncols % BLOCK[t] else "q6_K"
    if cat == "token_embd":
        return t
    if cat == "attn_v":
        if ftype == "Q2_K":
            t = "q4_K" if n_gqa >= 4 else "q3_K"
        elif ftype == "IQ3_S" and n_gqa >= 4:
            t = "q4_K"
        elif ftype == "Q3_K_M":
            t = "q5_K" if i < 2 else "q4_K"
        elif ftype == "IQ4_XS" and n_gqa >= 4:
            t = "q5_K"
        elif ftype == "Q4_K_M" and use_more_bits(i, n_layer):
            t = "q6_K"
        if n_expert == 8:
            t = "q8_0"
    elif cat == "attn_k":
        if n_expert == 8:
            t = "q8_0"
    elif cat == "ffn_down":
        if ftype == "Q2_K":
            t = "q3_K"
        elif ftype == "Q3_K_M":
            t = "q5_K" if i < n_layer // 16 else "q4_K"
        elif ftype == "Q4_K_M":
            if use_more_bits(i, n_layer):
                t = "q6_K"
        elif ftype == "IQ4_XS" and i < n_layer // 8:
            t = "q5_K"
    elif cat == "attn_output":
        if n_expert == 8:
            t = "q5_K"
        elif ftype == "Q2_K":
            t = "q3_K"
        elif ftype == "Q3_K_M":
            t = "q4_K"
    return t


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
    if len(sys.argv) < 6 or (sys.argv[2] not in BLOCK and sys.argv[2] not in FTYPE_DEFAULT):
        sys.exit(__doc__)
    lib = ctypes.CDLL(sys.argv[1])
    spec, src, dst, patterns = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    cfg = cfg.get("text_config", cfg)
    n_layer = cfg["num_hidden_layers"]
    n_expert = cfg.get("num_experts", cfg.get("num_local_experts", 0))
    n_gqa = cfg["num_attention_heads"] // cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    w = read_safetensors(os.path.join(src, "model.safetensors"))
    names = []
    for p in patterns:
        hit = sorted(n for n in w if fnmatch.fnmatchcase(n, p))
        if not hit:
            sys.exit("kquant: %s: no tensor named %s" % (src, p))
        names += [n for n in hit if n not in names]
    err = ref = 0.0
    nweights = nbytes = 0
    per = {}
    by_type = collections.Counter()
    for name in names:
        x = np.ascontiguousarray(w[name], dtype=np.float32)
        if x.ndim != 2:
            sys.exit("kquant: %s: shape %s: expected a matrix" % (name, list(x.shape)))
        rows, ncols = x.shape
        t = spec if spec in BLOCK else mix_type(spec, name, ncols, n_layer, n_expert, n_gqa)
        if ncols % BLOCK[t]:
            t = FALLBACK[t]
        if ncols % BLOCK[t]:
            sys.exit("kquant: %s: rows of %d weights are not whole blocks of %s" % (name, ncols, t))
        if t == "iq3_s":
            lib.iq3xs_init_impl(ctypes.c_int(512))  # ggml.c ggml_quantize_init(GGML_TYPE_IQ3_S); once
        quant = getattr(lib, "quantize_%s" % t)
        quant.restype = ctypes.c_size_t
        quant.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
        dequant = getattr(lib, "dequantize_row_%s" % t)
        dequant.restype = None
        dequant.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        q = ctypes.create_string_buffer(x.size * 2)  # every type here is under 16 bits per weight
        y = np.empty_like(x)
        size = quant(x.ctypes.data, q, rows, ncols, None)
        dequant(q, y.ctypes.data, x.size)
        d = x.astype(np.float64) - y.astype(np.float64)
        e1, r1 = float((d * d).sum()), float((x.astype(np.float64) ** 2).sum())
        per[name] = {"type": t, "rel_mse": e1 / r1}
        by_type[t] += x.size
        err += e1
        ref += r1
        nweights += x.size
        nbytes += size
        w[name] = y
    os.makedirs(dst, exist_ok=True)
    write_safetensors(os.path.join(dst, "model.safetensors"), w)
    for f in sorted(os.listdir(src)):
        if f.endswith(".json"):
            shutil.copyfile(os.path.join(src, f), os.path.join(dst, f))
    print(json.dumps({"spec": spec, "bits_per_weight": 8.0 * nbytes / nweights, "rel_mse": err / ref,
                      "tensors": len(names), "weights_by_type": dict(by_type), "per_tensor": per}, sort_keys=True))


if __name__ == "__main__":
    main()
