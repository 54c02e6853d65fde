#!/usr/bin/env python3
"""Readers and writers that follow other programs' rules for split directories, used by the
CLI tests as independent oracles (no tq code: standard library only).

The rules are restated from the consumers' published source (docs/compatibility.md names the
files): mac-code's research/flash-streaming (split_mlx_model.py writes, expert_io.py reads,
flash_moe.py / moe_agent.py compute) and the mlx-sniper package (mlx_expert_sniper:
preprocess.py writes, expert_io.py reads, engine.py computes).

  consumers.py read  TARGET SPLIT_DIR SOURCE_MODEL   read every expert of every layer and the
                                                     pinned tensors the way TARGET does; each
                                                     must equal the source's bytes
  consumers.py write TARGET SOURCE_MODEL OUT_DIR     split SOURCE_MODEL the way TARGET's own
                                                     writer does
  consumers.py wrap SOURCE_MODEL OUT_DIR             (a fixture) SOURCE_MODEL in Qwen3.5's
                                                     multimodal form: "language_model." names,
                                                     text_config
  TARGET: mac-code | mlx-sniper.  Exit 0 on success, 1 with a message otherwise.
"""
import glob
import json
import os
import re
import shutil
import struct
import sys

PAGE = 16384  # both consumers read and write exactly this many header bytes
DTYPE_SIZE = {"uint32": 4, "float16": 2, "bfloat16": 2, "float32": 4, "uint8": 1, "int8": 1,
              "uint16": 2, "int16": 2, "int32": 4, "float64": 8, "uint64": 8, "int64": 8, "bool": 1}
ST_TO_MLX = {"U32": "uint32", "F16": "float16", "BF16": "bfloat16", "F32": "float32", "U8": "uint8",
             "I8": "int8", "U16": "uint16", "I16": "int16", "I32": "int32", "F64": "float64",
             "U64": "uint64", "I64": "int64", "BOOL": "bool"}
MLX_TO_ST = {v: k for k, v in ST_TO_MLX.items()}
PROJS = ("gate_proj", "up_proj", "down_proj")


class Refused(Exception):
    pass


# ----------------------------------------------------------------- safetensors (stdlib)
class Model:
    """All tensors of a model directory (every *.safetensors file): name -> (path, dtype,
    shape, begin, end) with absolute offsets."""

    def __init__(self, path):
        self.dir = path if os.path.isdir(path) else os.path.dirname(path)
        files = sorted(glob.glob(os.path.join(path, "*.safetensors"))) if os.path.isdir(path) else [path]
        self.t = {}
        for f in files:
            for name, info in read_st_header(f).items():
                self.t[name] = info
        cfg = os.path.join(self.dir, "config.json")
        self.config = json.load(open(cfg)) if os.path.exists(cfg) else {}

    def bytes(self, name, lo=0, hi=None):
        f, _, _, b, e = self.t[name]
        hi = e - b if hi is None else hi
        with open(f, "rb") as fh:
            fh.seek(b + lo)
            return fh.read(hi - lo)


def read_st_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
    out = {}
    for name, v in h.items():
        if name == "__metadata__":
            continue
        b, e = v["data_offsets"]
        out[name] = (path, v["dtype"], list(v["shape"]), 8 + n + b, 8 + n + e)
    return out


def write_st(path, tensors, metadata=None):
    """tensors: name -> (safetensors dtype, shape, bytes)"""
    head, off = {}, 0
    if metadata:
        head["__metadata__"] = metadata
    for name in sorted(tensors):
        dt, shape, data = tensors[name]
        head[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(data)]}
        off += len(data)
    js = json.dumps(head).encode()
    js += b" " * (-len(js) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(js)) + js)
        for name in sorted(tensors):
            f.write(tensors[name][2])


def prod(xs):
    p = 1
    for x in xs:
        p *= x
    return p


# ----------------------------------------------------------------- the consumers' rules
RULES = {
    # mac-code flash-streaming: expert_io.MoEExpertReader, flash_moe.py / moe_agent.py
    "mac-code": {
        "names": "mlp.switch_mlp.{proj}.{part}",
        # the engines index these keys of config.json directly (a missing one is a KeyError)
        "config_keys": ["num_hidden_layers", "streaming", "hidden_size", "num_attention_heads",
                        "num_key_value_heads", "rms_norm_eps", "vocab_size", "max_position_embeddings",
                        "tie_word_embeddings", "num_experts", "num_experts_per_tok",
                        "shared_expert_intermediate_size", "moe_intermediate_size"],
        "pinned_name": lambda k: k,  # loaded as it is (load_weights(strict=False))
    },
    # mlx-sniper: mlx_expert_sniper.expert_io.MoEExpertReader, engine.MoESniperEngine35B
    "mlx-sniper": {
        "names": "switch_mlp.{proj}.{part}",
        "config_keys": ["num_hidden_layers", "streaming", "hidden_size", "num_attention_heads",
                        "num_key_value_heads", "rms_norm_eps", "vocab_size", "num_experts",
                        "num_experts_per_tok", "moe_intermediate_size"],
        "pinned_name": lambda k: k.replace("language_model.", "", 1),
    },
}
DENSE_KEYS = ["num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "rms_norm_eps",
              "vocab_size", "max_position_embeddings", "tie_word_embeddings"]
BITS, GROUP = 4, 64  # both engines call gather_qmm with these, whatever the files say


def mlx_dtype_bytes(s):
    # both readers strip "mlx.core." and map uint32/float16/float32/bfloat16, anything else
    # silently as float16
    s = s.replace("mlx.core.", "")
    return s if s in ("uint32", "float16", "float32", "bfloat16") else "float16"


def read_split(target, split, source):
    r = RULES[target]
    cfg = json.load(open(os.path.join(split, "config.json")))
    dense = target == "mac-code" and "expert_dir" not in cfg.get("streaming", {})
    # the dense engine (flash_stream_27b.py) indexes fewer keys than the MoE ones
    keys = DENSE_KEYS if dense else r["config_keys"]
    missing = [k for k in keys if k not in cfg]
    if missing:
        raise Refused("config.json lacks top-level %s" % ", ".join(missing))
    num_layers = cfg["num_hidden_layers"]
    streaming = cfg["streaming"]
    if dense:
        return read_dense_mac_code(split, source, num_layers, r)
    if target == "mac-code":
        expert_dir = "%s/%s" % (split, streaming["expert_dir"])  # f"{MODEL_DIR}/{expert_dir}"
    else:
        expert_dir = os.path.join(split, streaming["expert_dir"])
    headers = []
    for i in range(num_layers):
        with open("%s/layer_%02d.bin" % (expert_dir, i), "rb") as f:
            raw = f.read(PAGE)
        try:
            headers.append(json.loads(raw.rstrip(b"\x00")))
        except ValueError as ex:
            raise Refused("layer %d: the first %d bytes are not a NUL-padded JSON header (%s)" % (i, PAGE, ex))
    # the layout of layer 0 is used for every layer
    h0 = headers[0]["layout"]
    block, start, layout = h0["expert_block_size"], h0["data_start"], h0["tensors"]
    src = Model(source)
    n_exp = cfg["num_experts"]
    checked = 0
    for i in range(num_layers):
        path = "%s/layer_%02d.bin" % (expert_dir, i)
        fd = os.open(path, os.O_RDONLY)
        try:
            for e in range(n_exp):
                data = os.pread(fd, block, start + e * block)
                if len(data) != block:
                    raise Refused("%s: expert %d: short read" % (path, e))
                parts = {}
                for name, info in layout.items():
                    off, nb = info["inner_offset"], info["nbytes"]
                    dt = mlx_dtype_bytes(info["dtype"])
                    if nb != prod(info["shape_per_expert"]) * DTYPE_SIZE[dt]:
                        raise Refused("%s: %s: %d bytes cannot view as %s %s" % (path, name, nb, dt, info["shape_per_expert"]))
                    parts[name] = (dt, info["shape_per_expert"], data[off:off + nb])
                # what the engine's run_expert_ffn takes, and what gather_qmm(bits=4,
                # group_size=64) needs of it
                for proj in PROJS:
                    got = {}
                    for part in ("weight", "scales", "biases"):
                        key = r["names"].format(proj=proj, part=part)
                        if key not in parts:
                            raise Refused("layer %d: no tensor %s (KeyError)" % (i, key))
                        got[part] = parts[key]
                    w, s, b = got["weight"], got["scales"], got["biases"]
                    if w[0] != "uint32" or s[1] != b[1] or w[1][:-1] != s[1][:-1] or \
                            w[1][-1] * 32 // BITS != s[1][-1] * GROUP:
                        raise Refused("layer %d: %s is not affine %d-bit group %d (weight %s %s, scales %s)" %
                                      (i, proj, BITS, GROUP, w[0], w[1], s[1]))
                    for part in ("weight", "scales", "biases"):
                        want = source_expert(src, i, proj, part, e)
                        if got[part][2] != want:
                            raise Refused("layer %d expert %d %s.%s: bytes differ from the source" % (i, e, proj, part))
                        checked += 1
        finally:
            os.close(fd)
    # pinned: every tensor under the name the engine gives it, equal to the source's
    pinned = Model(os.path.join(split, streaming.get("pinned_file", "pinned.safetensors")))
    n_pinned = 0
    for k in pinned.t:
        name = r["pinned_name"](k)
        want = source_tensor(src, name)
        if want is None:
            raise Refused("pinned tensor %s (engine name %s) has no source tensor" % (k, name))
        if pinned.bytes(k) != want:
            raise Refused("pinned tensor %s: bytes differ from the source" % k)
        n_pinned += 1
    print("%s: %d layers x %d experts, %d expert tensors and %d pinned tensors equal the source" %
          (target, num_layers, n_exp, checked, n_pinned))


def read_dense_mac_code(split, source, num_layers, r):
    """direct_io.DirectFFNReader (flash_stream_27b.py, flash_agent.py): ffn_aligned/layer_LL.bin
    under the model directory, every layer's own 16384-byte header, absolute offsets, and
    quantized_matmul(bits=4, group_size=64) on mlp.{gate,up,down}_proj.{weight,scales,biases}"""
    src = Model(source)
    checked = 0
    for i in range(num_layers):
        path = "%s/ffn_aligned/layer_%02d.bin" % (split, i)
        with open(path, "rb") as f:
            raw = f.read(PAGE)
            try:
                header = json.loads(raw.rstrip(b"\x00").decode("utf-8"))
            except ValueError as ex:
                raise Refused("%s: the first %d bytes are not a NUL-padded JSON header (%s)" % (path, PAGE, ex))
            got = {}
            for name, info in header["tensors"].items():
                f.seek(info["offset"])
                data = f.read(info["nbytes"])
                if len(data) != info["nbytes"]:
                    raise IOError("pread returned %d bytes, expected %d at offset %d" % (len(data), info["nbytes"], info["offset"]))
                got[name] = (mlx_dtype_bytes(info["dtype"]), info["shape"], data)
        for proj in PROJS:
            parts = []
            for part in ("weight", "scales", "biases"):
                key = "mlp.%s.%s" % (proj, part)
                if key not in got:
                    raise Refused("layer %d: no tensor %s (KeyError)" % (i, key))
                parts.append(got[key])
                want = source_tensor(src, "model.layers.%d.%s" % (i, key))
                if want != got[key][2]:
                    raise Refused("layer %d %s: bytes differ from the source" % (i, key))
                checked += 1
            w, sc = parts[0], parts[1]
            if w[0] != "uint32" or w[1][-1] * 32 // BITS != sc[1][-1] * GROUP:
                raise Refused("layer %d: %s is not affine %d-bit group %d" % (i, proj, BITS, GROUP))
    print("mac-code: %d dense layers, %d FFN tensors equal the source" % (num_layers, checked))


def unwrap(name):
    """A source name as the text model's own (mlx-lm) name: without "language_model."."""
    if name.startswith("language_model."):
        return name[len("language_model."):]
    if name.startswith("model.language_model."):
        return "model." + name[len("model.language_model."):]
    return name


def source_tensor(src, name):
    for k in src.t:
        if unwrap(k) == name:
            return src.bytes(k)
    return None


def source_expert(src, layer, proj, part, e):
    want = "model.layers.%d.mlp.switch_mlp.%s.%s" % (layer, proj, part)
    for k, (_, _, shape, b, end) in src.t.items():
        if unwrap(k) == want:
            per = (end - b) // shape[0]
            return src.bytes(k, e * per, (e + 1) * per)
    raise Refused("source has no %s" % want)


# ----------------------------------------------------------------- the consumers' writers
def stacked_experts(src, strip_prefix):
    """layer -> {local name: source tensor name} for every switch_mlp tensor; mac-code's local
    name keeps "mlp." (what follows "layers.L."), mlx-sniper's drops it"""
    layers, pinned = {}, {}
    for k in sorted(src.t):
        name = unwrap(k) if strip_prefix else k
        if "switch_mlp" in name:
            m = re.search(r"layers\.(\d+)\.", name)
            layer = int(m.group(1))
            local = name.split("layers.%d.%s" % (layer, "" if strip_prefix else "mlp."))[-1]
            layers.setdefault(layer, {})[local] = k
        else:
            pinned[name] = k
    return layers, pinned


def write_layer(path, header, src, order, n_exp, block):
    js = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(js + b"\x00" * (PAGE - len(js)))
        for e in range(n_exp):
            blk = b""
            for key in order:
                _, _, shape, b, end = src.t[key]
                per = (end - b) // shape[0]
                blk += src.bytes(key, e * per, (e + 1) * per)
            f.write(blk + b"\x00" * (block - len(blk)))


def block_layout(src, data, order, keys):
    """Tensors of one expert block packed back to back in `order`; each entry's keys in the
    order the writer inserts them (json.dumps keeps it). Returns (entries, block size)."""
    entries, off = {}, 0
    for key in order:
        _, dt, shape, b, end = src.t[data[key]]
        nb = (end - b) // shape[0]
        v = {"inner_offset": off, "nbytes": nb, "dtype": "mlx.core." + ST_TO_MLX[dt], "shape_per_expert": shape[1:]}
        entries[key] = {k: v[k] for k in keys}
        off += nb
    return entries, (off + PAGE - 1) // PAGE * PAGE


def write_pinned(path, src, pinned):
    out = {}
    for name, k in pinned.items():
        _, dt, shape, _, _ = src.t[k]
        out[name] = (dt, shape, src.bytes(k))
    write_st(path, out, {"format": "mlx"})


def copy_tokenizer(src, out):
    for tf in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
               "vocab.json", "merges.txt"):
        if os.path.exists(os.path.join(src.dir, tf)):
            shutil.copy(os.path.join(src.dir, tf), os.path.join(out, tf))


# The streaming configs both writers build from text_config (or the config itself). The keys
# marked "tq-run" are not written by the consumers (their Qwen3.5 engine takes them from its
# model class); a qwen3_moe model needs them spelled out for its decode to be defined.
def stream_config(config, streaming, mac):
    tc = config.get("text_config", config)
    c = {
        "model_type": tc.get("model_type", "qwen3_5_moe"),
        "hidden_size": tc["hidden_size"],
        "num_hidden_layers": tc["num_hidden_layers"],
        "num_attention_heads": tc["num_attention_heads"],
        "num_key_value_heads": tc["num_key_value_heads"],
        "rms_norm_eps": tc["rms_norm_eps"],
        "vocab_size": tc["vocab_size"],
        "max_position_embeddings": tc.get("max_position_embeddings", 262144),
        "head_dim": tc.get("head_dim"),
        "tie_word_embeddings": config.get("tie_word_embeddings", False),
        "num_experts": tc["num_experts"],
        "num_experts_per_tok": tc["num_experts_per_tok"],
        "shared_expert_intermediate_size": tc.get("shared_expert_intermediate_size"),
        "moe_intermediate_size": tc["moe_intermediate_size"],
        "rope_parameters": tc.get("rope_parameters"),
        "quantization": config.get("quantization", {"bits": 4, "group_size": 64}),
        "streaming": streaming,
    }
    for k in ("rope_theta", "norm_topk_prob", "decoder_sparse_step"):  # tq-run
        if k in tc:
            c[k] = tc[k]
    return c


def write_mac_code(source, out):
    """split_mlx_model.py: experts/layer_LL.bin with a moe_flash_v1 header"""
    src = Model(source)
    os.makedirs(os.path.join(out, "experts"))
    layers, pinned = stacked_experts(src, strip_prefix=True)
    write_pinned(os.path.join(out, "pinned.safetensors"), src, pinned)
    n_exp = 0
    for layer in sorted(layers):
        data = layers[layer]
        order = ["mlp.switch_mlp.%s.%s" % (p, s) for p in PROJS for s in ("weight", "scales", "biases")
                 if "mlp.switch_mlp.%s.%s" % (p, s) in data]
        n_exp = src.t[data[order[0]]][2][0]
        tensors, block = block_layout(src, data, order, ("inner_offset", "nbytes", "dtype", "shape_per_expert"))
        header = {"format": "moe_flash_v1", "page_size": PAGE, "layer_idx": layer,
                  "total_size": PAGE + n_exp * block,
                  "layout": {"num_experts": n_exp, "expert_block_size": block, "data_start": PAGE,
                             "tensors": tensors}}
        write_layer(os.path.join(out, "experts", "layer_%02d.bin" % layer), header, src,
                    [data[k] for k in order], n_exp, block)
    tc = src.config.get("text_config", src.config)
    streaming = {"pinned_file": "pinned.safetensors", "expert_dir": "experts/",
                 "num_layers": tc["num_hidden_layers"], "num_experts": n_exp, "experts_per_tok": 8}
    json.dump(stream_config(src.config, streaming, True), open(os.path.join(out, "config.json"), "w"), indent=2)
    copy_tokenizer(src, out)


def write_mlx_sniper(source, out):
    """preprocess.py: bin/moe_layer_LL.bin (header without format), bin/layer_LL.bin links,
    pinned names as in the source"""
    src = Model(source)
    os.makedirs(os.path.join(out, "bin"))
    tc = src.config.get("text_config", src.config)
    n_layers, n_exp = tc["num_hidden_layers"], tc["num_experts"]
    order = ["switch_mlp.%s.%s" % (p, s) for p in PROJS for s in ("weight", "scales", "biases")]
    layers, pinned = stacked_experts(src, strip_prefix=False)
    for layer in sorted(layers):
        data = layers[layer]
        if len(data) < len(order):
            raise Refused("layer %d lacks some of %s" % (layer, order))
        info, block = block_layout(src, data, order, ("inner_offset", "nbytes", "shape_per_expert", "dtype"))
        header = {"layer_idx": layer, "num_experts": n_exp,
                  "layout": {"expert_block_size": block, "data_start": PAGE, "tensors": info}}
        write_layer(os.path.join(out, "bin", "moe_layer_%02d.bin" % layer), header, src,
                    [data[k] for k in order], n_exp, block)
    write_pinned(os.path.join(out, "pinned.safetensors"), src, pinned)
    for i in range(n_layers):
        if os.path.exists(os.path.join(out, "bin", "moe_layer_%02d.bin" % i)):
            os.symlink("moe_layer_%02d.bin" % i, os.path.join(out, "bin", "layer_%02d.bin" % i))
    streaming = {"pinned_file": "pinned.safetensors", "expert_dir": "bin"}
    json.dump(stream_config(src.config, streaming, False), open(os.path.join(out, "config.json"), "w"), indent=2)
    copy_tokenizer(src, out)


def wrap(source, out):
    """Test fixture, not a consumer's rule: SOURCE in the multimodal MLX form of Qwen3.5
    checkpoints: every tensor under "language_model.", the text model's keys in text_config"""
    src = Model(source)
    os.makedirs(out)
    tensors = {}
    for k, (_, dt, shape, _, _) in src.t.items():
        tensors["language_model." + k] = (dt, shape, src.bytes(k))
    write_st(os.path.join(out, "model.safetensors"), tensors, {"format": "mlx"})
    top = {k: src.config[k] for k in ("architectures", "quantization", "tie_word_embeddings", "torch_dtype")
           if k in src.config}
    top["model_type"] = "qwen3_5_moe"
    top["text_config"] = {k: v for k, v in src.config.items() if k != "quantization"}
    json.dump(top, open(os.path.join(out, "config.json"), "w"), indent=2)
    copy_tokenizer(src, out)


def main(argv):
    if len(argv) == 4 and argv[1] == "wrap":
        wrap(argv[2], argv[3])
        return 0
    if len(argv) != 5 or argv[1] not in ("read", "write") or argv[2] not in RULES:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        if argv[1] == "read":
            read_split(argv[2], argv[3], argv[4])
        elif argv[2] == "mac-code":
            write_mac_code(argv[3], argv[4])
        else:
            write_mlx_sniper(argv[3], argv[4])
    except (Refused, KeyError, OSError, ValueError) as ex:
        print("%s %s: %s: %s" % (argv[1], argv[2], type(ex).__name__, ex), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
