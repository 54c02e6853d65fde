#!/usr/bin/python3
"""testdata/models/train.py — trains the small test models committed in testdata/models/.

Usage (from the repository root, after `make all`; needs Debian's python3-torch and
libopenblas0-pthread, run with /usr/bin/python3 because torch is a Debian package):

    nice -n 10 /usr/bin/python3 testdata/models/train.py all WORKDIR

which runs, in order (each step can be run alone with the same WORKDIR):

    corpus WORKDIR      English text from the Python 3.11 documentation as Debian's
                        python3.11-doc ships it (/usr/share/doc/python3.11/html/_sources,
                        reStructuredText sources, PSF license): light markup removal, files in
                        sorted path order; two tutorial chapters are held out as the evaluation
                        text (testdata/models/eval/python-doc-eval.txt), never trained on
    tokenizer WORKDIR   a byte-level BPE tokenizer.json (Qwen2-style: NFC, the Qwen2 split
                        regex, GPT-2's byte-to-character map) with 2048 ids learnt from the
                        training text: id 0 <|endoftext|>, ids 1..256 the bytes, then merges
    encode WORKDIR      the training text to token ids with tq's own tokenizer
                        (bin/tq-run --tokenizer DIR --encode), so the models see exactly the ids
                        tq-run --eval feeds them
    dense WORKDIR       trains qwen3-tiny (qwen3, dense) and writes it to testdata/models/
    moe WORKDIR         trains qwen3-moe-tiny (qwen3_moe, 8 experts, top-2)

Determinism: fixed seeds, torch.use_deterministic_algorithms(True), one thread
(torch.set_num_threads(1), OPENBLAS_NUM_THREADS=1). The same machine type, torch and BLAS
give the same weights bit for bit; another BLAS or CPU kernel gives other rounding, so the
committed weights, not a rerun, are what tests use. Weights are trained in f32 and written as
bf16 safetensors with HF names and a config.json transformers reads.

Long runs: `dense` and `moe` write WORKDIR/NAME.ckpt every CKPT_EVERY steps (the weights, the
optimizer's state and the batch generator's) and, started again with the same WORKDIR, resume
from it; a resumed run writes the same weights as one never stopped. Every 250 steps they
print the held-out perplexity so far (which reads no random state and changes nothing)."""
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import glob
import json
import math
import re
import struct
import subprocess
import sys
import time
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DOC = "/usr/share/doc/python3.11/html/_sources"
SECTIONS = ["tutorial", "faq", "howto", "reference", "using", "extending", "library"]
HELD_OUT = ["tutorial/classes.rst.txt", "tutorial/errors.rst.txt"]
VOCAB = 2048
EOT = "<|endoftext|>"
CTX = 128  # training context (tokens)

# ----------------------------------------------------------------------------- corpus
ROLE = re.compile(r":[a-zA-Z][\w.+-]*(?::[a-zA-Z][\w.+-]*)*:`(?:~|!)?([^`]*?)(?:\s*<[^`>]*>)?`")
LINK = re.compile(r"`([^`<]+?)\s*<[^`>]*>`__?")
LITERAL = re.compile(r"``([^`]+)``")
REFNAME = re.compile(r"`([^`]+)`_")
UNDERLINE = re.compile(r"^([=\-~^*+#\"'`.:_])\1{3,}\s*$")


def clean_rst(text):
    """Markup to plain text: directives and their options, comments, labels and heading
    underlines go; roles, links and literals keep their text. Code blocks stay."""
    out, skip_indent = [], None
    for line in text.split("\n"):
        s = line.strip()
        ind = len(line) - len(line.lstrip(" "))
        if skip_indent is not None:
            if s == "" or ind > skip_indent:
                if s == "" or s.startswith(":"):
                    continue
                skip_indent = None  # directive content (e.g. a code block): keep
            else:
                skip_indent = None
        if s.startswith(".. "):
            d = s[3:]
            keep = re.match(r"(note|warning|seealso|versionadded|versionchanged|deprecated|impl-detail|tip|important)::\s*(.*)", d)
            skip_indent = ind
            if keep and keep.group(2):
                out.append(" " * ind + keep.group(2))
            continue
        if s == "..":
            skip_indent = ind
            continue
        if UNDERLINE.match(line):
            continue
        line = ROLE.sub(r"\1", line)
        line = LINK.sub(r"\1", line)
        line = LITERAL.sub(r"\1", line)
        line = REFNAME.sub(r"\1", line)
        line = line.replace("**", "").replace("\\ ", "")
        if line.rstrip().endswith("::") and not line.rstrip().endswith(" ::"):
            line = line.rstrip()[:-1]
        elif line.rstrip().endswith(" ::"):
            line = line.rstrip()[:-3]
        if line.strip() == ":":  # a lone "::" introducing a code block
            continue
        out.append(line.rstrip())
    text = "\n".join(out)
    text = re.sub(r"\n{3,}", "\n\n", text).strip("\n") + "\n"
    return text


def doc_files():
    files = []
    for s in SECTIONS:
        files += sorted(glob.glob(os.path.join(DOC, s, "**", "*.rst.txt"), recursive=True))
    return sorted(os.path.relpath(f, DOC) for f in files)


def cmd_corpus(work):
    os.makedirs(work, exist_ok=True)
    train, held = [], []
    for rel in doc_files():
        with open(os.path.join(DOC, rel), encoding="utf-8") as f:
            t = unicodedata.normalize("NFC", clean_rst(f.read()))
        (held if rel in HELD_OUT else train).append(t)
    with open(os.path.join(work, "train.txt"), "w", encoding="utf-8") as f:
        f.write(EOT.join(train))
    os.makedirs(os.path.join(HERE, "eval"), exist_ok=True)
    with open(os.path.join(HERE, "eval", "python-doc-eval.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(held))
    write_license()
    print("corpus: %d training files, %d bytes; held out %s" % (len(train), sum(len(t.encode()) for t in train), HELD_OUT))


def write_license():
    """eval/LICENSE.python-doc: the documentation's copyright notice and the PSF License
    Agreement as the package ships them (clause 2 asks for both to be kept with derived
    work), and the summary of changes clause 3 asks for."""
    with open(os.path.join(DOC, "copyright.rst.txt"), encoding="utf-8") as f:
        notice = [" ".join(p.split()) for p in f.read().split("\n\n") if p.startswith("Copyright ")]
    with open(os.path.join(DOC, "license.rst.txt"), encoding="utf-8") as f:
        lic = f.read()
    start = lic.index("PSF LICENSE AGREEMENT FOR PYTHON |release|")
    body = lic[start:lic.index("BEOPEN.COM LICENSE AGREEMENT")].replace("|release|", "3.11")
    body = "\n".join(l for l in body.split("\n") if not l.startswith(".. ") and not re.match(r"^-+$", l))
    text = ("The evaluation text in this directory, and the text the models here were trained on, come from the\n"
            "Python 3.11 documentation as Debian's python3.11-doc package ships it\n"
            "(/usr/share/doc/python3.11/html/_sources). The documentation is:\n\n" + "\n".join(notice) +
            "\n\nand is licensed under the PSF License Agreement (its code examples also under the Zero-Clause BSD\n"
            "license). Changes made (PSF License clause 3): reStructuredText markup removed (directives, comments,\n"
            "labels, heading underlines; roles, links and literals reduced to their text), files joined; the\n"
            "evaluation text is the tutorial chapters " + " and ".join(HELD_OUT) + " so changed.\n\n" +
            re.sub(r"\n{3,}", "\n\n", body.strip("\n")) + "\n")
    with open(os.path.join(HERE, "eval", "LICENSE.python-doc"), "w", encoding="utf-8") as f:
        f.write(text)


# -------------------------------------------------------------------------- tokenizer
def byte_chars():
    """GPT-2's map from bytes to printable characters."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def pieces(text):
    """The Qwen2 split regex, (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|
    ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+, written out with str methods
    (Python's re has no \\p classes). Only merge statistics depend on it; tq's tokenizer
    applies the real expression when encoding."""
    L = lambda c: unicodedata.category(c).startswith("L")
    N = lambda c: unicodedata.category(c).startswith("N")
    S = lambda c: c.isspace()
    i, n, out = 0, len(text), []
    while i < n:
        c = text[i]
        low = text[i:i + 3].lower()
        m = None
        if c == "'":
            for suf in ("'re", "'ve", "'ll", "'s", "'t", "'m", "'d"):
                if low.startswith(suf):
                    m = i + len(suf)
                    break
        if m is None and (L(c) or (c not in "\r\n" and not N(c) and i + 1 < n and L(text[i + 1]))):
            j = i + 1
            while j < n and L(text[j]):
                j += 1
            m = j
        if m is None and N(c):
            m = i + 1
        if m is None:
            j = i + 1 if c == " " else i
            if j < n and not S(text[j]) and not L(text[j]) and not N(text[j]):
                j += 1
                while j < n and not S(text[j]) and not L(text[j]) and not N(text[j]):
                    j += 1
                while j < n and text[j] in "\r\n":
                    j += 1
                m = j
        if m is None:
            j = i
            while j < n and S(text[j]):
                j += 1
            k = j
            while k > i and text[k - 1] not in "\r\n":
                k -= 1
            if k > i:
                m = k
            elif j < n and j - i > 1:
                m = j - 1
            else:
                m = j
        out.append(text[i:m])
        i = m
    return out


def cmd_tokenizer(work):
    with open(os.path.join(work, "train.txt"), encoding="utf-8") as f:
        text = f.read()
    text = text[: 3 << 20]  # the merges are learnt from the first 3 MiB
    bc = byte_chars()
    counts = {}
    for doc in text.split(EOT):
        for p in pieces(doc):
            w = tuple(bc[b] for b in p.encode("utf-8"))
            counts[w] = counts.get(w, 0) + 1
    vocab = {EOT: 0}
    for b in range(256):
        vocab[bc[b]] = 1 + b
    words = [list(w) for w in sorted(counts)]
    freq = [counts[w] for w in sorted(counts)]
    pairs, where = {}, {}
    for wi, w in enumerate(words):
        for a, b in zip(w, w[1:]):
            pairs[(a, b)] = pairs.get((a, b), 0) + freq[wi]
            where.setdefault((a, b), set()).add(wi)
    merges = []
    t0 = time.time()
    while len(vocab) < VOCAB and pairs:
        # most frequent pair; ties go to the smaller ids, then the smaller strings
        best = max(pairs.items(), key=lambda kv: (kv[1], -vocab[kv[0][0]], -vocab[kv[0][1]]))[0]
        if pairs[best] < 2:
            break
        a, b = best
        ab = a + b
        merges.append(best)
        if ab not in vocab:
            vocab[ab] = len(vocab)
        for wi in sorted(where.pop(best, ())):
            w = words[wi]
            for x, y in zip(w, w[1:]):
                pairs[(x, y)] -= freq[wi]
                if pairs[(x, y)] == 0:
                    del pairs[(x, y)]
            j, nw = 0, []
            while j < len(w):
                if j + 1 < len(w) and w[j] == a and w[j + 1] == b:
                    nw.append(ab)
                    j += 2
                else:
                    nw.append(w[j])
                    j += 1
            words[wi] = nw
            for x, y in zip(nw, nw[1:]):
                pairs[(x, y)] = pairs.get((x, y), 0) + freq[wi]
                where.setdefault((x, y), set()).add(wi)
    print("tokenizer: %d ids, %d merges in %.0f s" % (len(vocab), len(merges), time.time() - t0))
    bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    split = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
             "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
    tok = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": 0, "content": EOT, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True}],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": split}, "behavior": "Isolated", "invert": False}, bl]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "decoder": bl,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [[a, b] for a, b in merges]},
    }
    cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 512, "eos_token": EOT,
           "bos_token": None, "unk_token": None, "pad_token": EOT, "add_bos_token": False, "clean_up_tokenization_spaces": False}
    tdir = os.path.join(work, "tokenizer")
    os.makedirs(tdir, exist_ok=True)
    for name, obj in (("tokenizer.json", tok), ("tokenizer_config.json", cfg)):
        with open(os.path.join(tdir, name), "w", encoding="utf-8") as f:
            json.dump(obj, f, ensure_ascii=False, indent=1, sort_keys=True)
            f.write("\n")


def tq_encode(tdir, text):
    r = subprocess.run([os.path.join(ROOT, "bin", "tq-run"), "--tokenizer", tdir, "--encode"], input=text.encode("utf-8"),
                       stdout=subprocess.PIPE, check=True)
    s = r.stdout.decode().strip()
    return [int(x) for x in s.split(",")] if s else []


def cmd_encode(work):
    with open(os.path.join(work, "train.txt"), encoding="utf-8") as f:
        docs = f.read().split(EOT)
    tdir = os.path.join(work, "tokenizer")
    ids = []
    for d in docs:
        ids += tq_encode(tdir, d) + [0]
    with open(os.path.join(work, "train.ids"), "wb") as f:
        f.write(struct.pack("<%dH" % len(ids), *ids))
    nbytes = sum(len(d.encode()) for d in docs)
    print("encode: %d tokens (%.2f bytes/token)" % (len(ids), nbytes / len(ids)))


# ------------------------------------------------------------------------------ model
DENSE = dict(name="qwen3-tiny", model_type="qwen3", hidden=256, layers=4, heads=4, kv_heads=2, head_dim=64,
             inter=768, steps=3000, batch=16, lr=3e-3, seed=1)
MOE = dict(name="qwen3-moe-tiny", model_type="qwen3_moe", hidden=256, layers=4, heads=4, kv_heads=2, head_dim=64,
           inter=768, experts=8, top_k=2, moe_inter=128, steps=3000, batch=16, lr=3e-3, seed=2)
ROPE_THETA = 10000.0
CKPT_EVERY = 50
EPS = 1e-6


def build(cfg):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    H, hd, nh, nkv = cfg["hidden"], cfg["head_dim"], cfg["heads"], cfg["kv_heads"]

    class RMSNorm(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(n))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * self.weight

    class MLP(nn.Module):
        def __init__(self, inter):
            super().__init__()
            self.gate_proj = nn.Linear(H, inter, bias=False)
            self.up_proj = nn.Linear(H, inter, bias=False)
            self.down_proj = nn.Linear(inter, H, bias=False)

        def forward(self, x):
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))

    class MoE(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate = nn.Linear(H, cfg["experts"], bias=False)
            self.experts = nn.ModuleList([MLP(cfg["moe_inter"]) for _ in range(cfg["experts"])])

        def forward(self, x):
            shp = x.shape
            x = x.reshape(-1, H)
            probs = torch.softmax(self.gate(x), -1)
            w, sel = torch.topk(probs, cfg["top_k"], -1)
            w = w / w.sum(-1, keepdim=True)  # norm_topk_prob
            out = torch.zeros_like(x)
            for e in range(cfg["experts"]):
                rows, slot = torch.nonzero(sel == e, as_tuple=True)
                if rows.numel():
                    out = out.index_add(0, rows, self.experts[e](x[rows]) * w[rows, slot].unsqueeze(-1))
            # switch-style balance loss: E * sum_e (share of routed slots) * (mean probability)
            share = torch.zeros(cfg["experts"]).index_add(0, sel.reshape(-1), torch.ones(sel.numel())) / sel.numel()
            self.aux = cfg["experts"] * (share * probs.mean(0)).sum()
            return out.reshape(shp)

    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj = nn.Linear(H, nh * hd, bias=False)
            self.k_proj = nn.Linear(H, nkv * hd, bias=False)
            self.v_proj = nn.Linear(H, nkv * hd, bias=False)
            self.o_proj = nn.Linear(nh * hd, H, bias=False)
            self.q_norm = RMSNorm(hd)
            self.k_norm = RMSNorm(hd)

        def forward(self, x, cos, sin, mask):
            b, t, _ = x.shape
            q = self.q_norm(self.q_proj(x).view(b, t, nh, hd)).transpose(1, 2)
            k = self.k_norm(self.k_proj(x).view(b, t, nkv, hd)).transpose(1, 2)
            v = self.v_proj(x).view(b, t, nkv, hd).transpose(1, 2)

            def rope(z):
                z1, z2 = z[..., : hd // 2], z[..., hd // 2:]
                return z * cos + torch.cat((-z2, z1), -1) * sin

            q, k = rope(q), rope(k)
            k = k.repeat_interleave(nh // nkv, 1)
            v = v.repeat_interleave(nh // nkv, 1)
            a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(hd) + mask, -1) @ v
            return self.o_proj(a.transpose(1, 2).reshape(b, t, nh * hd))

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.input_layernorm = RMSNorm(H)
            self.post_attention_layernorm = RMSNorm(H)
            self.self_attn = Attn()
            self.mlp = MoE() if cfg["model_type"] == "qwen3_moe" else MLP(cfg["inter"])

        def forward(self, x, cos, sin, mask):
            x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
            return x + self.mlp(self.post_attention_layernorm(x))

    class Inner(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(VOCAB, H)
            self.layers = nn.ModuleList([Layer() for _ in range(cfg["layers"])])
            self.norm = RMSNorm(H)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.model = Inner()
            self.lm_head = nn.Linear(H, VOCAB, bias=False)

        def forward(self, ids):
            t = ids.shape[1]
            inv = 1.0 / (ROPE_THETA ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
            ang = torch.arange(t, dtype=torch.float64)[:, None] * inv[None, :]
            ang = torch.cat((ang, ang), -1)
            cos, sin = ang.cos().float(), ang.sin().float()
            mask = torch.triu(torch.full((t, t), float("-inf")), 1)
            x = self.model.embed_tokens(ids)
            for layer in self.model.layers:
                x = layer(x, cos, sin, mask)
            return self.lm_head(self.model.norm(x))

        def aux(self):
            return sum(l.mlp.aux for l in self.model.layers if hasattr(l.mlp, "aux"))

    m = Model()
    g = torch.Generator().manual_seed(cfg["seed"])
    for name, p in sorted(m.named_parameters()):
        if p.dim() == 1:
            continue
        std = 0.02
        if name.endswith("o_proj.weight") or name.endswith("down_proj.weight"):
            std = 0.02 / math.sqrt(2 * cfg["layers"])
        with torch.no_grad():
            p.copy_(torch.randn(p.shape, generator=g) * std)
    return m


def hf_config(cfg):
    c = {
        "architectures": ["Qwen3MoeForCausalLM" if cfg["model_type"] == "qwen3_moe" else "Qwen3ForCausalLM"],
        "model_type": cfg["model_type"], "vocab_size": VOCAB, "hidden_size": cfg["hidden"],
        "intermediate_size": cfg["inter"], "num_hidden_layers": cfg["layers"], "num_attention_heads": cfg["heads"],
        "num_key_value_heads": cfg["kv_heads"], "head_dim": cfg["head_dim"], "max_position_embeddings": 512,
        "rms_norm_eps": EPS, "rope_theta": ROPE_THETA, "rope_scaling": None, "tie_word_embeddings": False,
        "attention_bias": False, "attention_dropout": 0.0, "hidden_act": "silu", "initializer_range": 0.02,
        "use_cache": True, "use_sliding_window": False, "sliding_window": None, "max_window_layers": cfg["layers"],
        "torch_dtype": "bfloat16", "bos_token_id": 0, "eos_token_id": 0,
    }
    if cfg["model_type"] == "qwen3_moe":
        c.update({"num_experts": cfg["experts"], "num_experts_per_tok": cfg["top_k"],
                  "moe_intermediate_size": cfg["moe_inter"], "norm_topk_prob": True, "decoder_sparse_step": 1,
                  "mlp_only_layers": [], "router_aux_loss_coef": 0.01, "output_router_logits": False})
    return c


def write_safetensors(path, tensors):
    """bf16 safetensors: a sorted JSON header padded with spaces to 8 bytes, then the data."""
    import torch
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().to(torch.bfloat16).contiguous()
        b = t.view(torch.int16).numpy().astype("<i2").tobytes()
        header[name] = {"dtype": "BF16", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":"), sort_keys=True).encode()
    h += b" " * (-len(h) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)
    os.replace(path + ".tmp", path)


def held_out(m, ev):
    """perplexity of the held-out ids in windows of CTX without overlap (f32, torch); reads no
    random state, so evaluating during training leaves the weights unchanged"""
    import torch
    import torch.nn.functional as F

    m.eval()
    with torch.no_grad():
        nll, n = 0.0, 0
        for s in range(0, len(ev) - 1, CTX):
            x = torch.tensor(ev[s:s + CTX + 1])[None]
            if x.shape[1] < 2:
                break
            lg = m(x[:, :-1])
            nll += F.cross_entropy(lg[0], x[0, 1:], reduction="sum").item()
            n += x.shape[1] - 1
    m.train()
    return math.exp(nll / n), n


def cmd_train(work, cfg, stop_after=None):
    """stop_after: return after the checkpoint at or past that step (to test resuming)"""
    import shutil

    import torch
    import torch.nn.functional as F

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(cfg["seed"])
    with open(os.path.join(work, "train.ids"), "rb") as f:
        raw = f.read()
    data = torch.tensor(struct.unpack("<%dH" % (len(raw) // 2), raw), dtype=torch.long)
    with open(os.path.join(HERE, "eval", "python-doc-eval.txt"), encoding="utf-8") as f:
        ev = tq_encode(os.path.join(work, "tokenizer"), f.read())
    m = build(cfg)
    decay = [p for n, p in sorted(m.named_parameters()) if p.dim() > 1]
    other = [p for n, p in sorted(m.named_parameters()) if p.dim() <= 1]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                            lr=cfg["lr"], betas=(0.9, 0.95), eps=1e-8)
    g = torch.Generator().manual_seed(1000 + cfg["seed"])
    steps, B, warm = cfg["steps"], cfg["batch"], 30
    # a checkpoint every CKPT_EVERY steps: a run that is stopped resumes where it was, with
    # the weights, the optimizer's moments and the batch generator as they were, so a
    # resumed run writes the same weights as one that was never stopped
    ckpt = os.path.join(work, cfg["name"] + ".ckpt")
    first = 0
    if os.path.exists(ckpt):
        st = torch.load(ckpt)
        if st["cfg"] != cfg:
            sys.exit("%s: made with another configuration (%r); remove it to start again" % (ckpt, st["cfg"]))
        m.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
        g.set_state(st["gen"])
        torch.set_rng_state(st["rng"])
        first = st["step"]
        print("%s: resuming at step %d from %s" % (cfg["name"], first, ckpt), flush=True)
    t0 = time.time()
    for step in range(first, steps):
        lr = cfg["lr"] * (step + 1) / warm if step < warm else \
            cfg["lr"] * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (step - warm) / (steps - warm))))
        for gr in opt.param_groups:
            gr["lr"] = lr
        starts = torch.randint(0, len(data) - CTX - 1, (B,), generator=g)
        x = torch.stack([data[s:s + CTX + 1] for s in starts.tolist()])
        logits = m(x[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), x[:, 1:].reshape(-1))
        total = loss + (0.01 * m.aux() if cfg["model_type"] == "qwen3_moe" else 0)
        opt.zero_grad()
        total.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        if step % 25 == 0 or step == steps - 1:
            print("%s: step %d/%d loss %.4f lr %.2e (%.0f s)" % (cfg["name"], step, steps, loss.item(), lr,
                                                                    time.time() - t0), flush=True)
        if (step + 1) % 250 == 0 and step + 1 < steps:  # progress only: the held-out perplexity so far
            print("%s: after %d steps held-out perplexity %.3f" % (cfg["name"], step + 1, held_out(m, ev)[0]), flush=True)
        if (step + 1) % CKPT_EVERY == 0 and step + 1 < steps:
            torch.save({"cfg": cfg, "step": step + 1, "model": m.state_dict(), "opt": opt.state_dict(),
                        "gen": g.get_state(), "rng": torch.get_rng_state()}, ckpt + ".tmp")
            os.replace(ckpt + ".tmp", ckpt)
            if stop_after is not None and step + 1 >= stop_after:
                return
    out = os.path.join(HERE, cfg["name"])
    os.makedirs(out, exist_ok=True)
    sd = {k: v for k, v in m.state_dict().items()}
    write_safetensors(os.path.join(out, "model.safetensors"), sd)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(hf_config(cfg), f, indent=2, sort_keys=True)
        f.write("\n")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(os.path.join(work, "tokenizer", name), os.path.join(out, name))
    if os.path.exists(ckpt):
        os.remove(ckpt)
    # the held-out loss as torch computes it (f32 weights), for the README
    ppl, n = held_out(m, ev)
    print("%s: trained in %.0f s; held-out perplexity (torch, f32, windows of %d) %.3f over %d tokens" %
          (cfg["name"], time.time() - t0, CTX, ppl, n))


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("corpus", "tokenizer", "encode", "dense", "moe", "all"):
        sys.exit(__doc__)
    cmd, work = sys.argv[1], sys.argv[2]
    if cmd in ("corpus", "all"):
        cmd_corpus(work)
    if cmd in ("tokenizer", "all"):
        cmd_tokenizer(work)
    if cmd in ("encode", "all"):
        cmd_encode(work)
    if cmd in ("dense", "all"):
        cmd_train(work, DENSE)
    if cmd in ("moe", "all"):
        cmd_train(work, MOE)


if __name__ == "__main__":
    main()
