#!/usr/bin/env python3
"""Regenerates the malformed files of tests/fuzz/corpus/safetensors (NAME.safetensors), the one
corpus that the safetensors fuzz target replays and tests/cli/safetensors-malformed.sh feeds to
tq-verify ls. Each file breaks one rule; the exact line tq-verify ls must print for it is in
tests/cli/safetensors-malformed.stdout.exact. The valid-*.safetensors seeds are not made here.
The files are committed; this script documents how each was made."""
import json, os, struct, sys

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "safetensors")
cases = {}

def raw(name, data):
    cases[name] = data

def hdr(name, header_bytes, data=b"", n=None):
    """u64 length (default: the header's), the header bytes, then data."""
    if isinstance(header_bytes, str):
        header_bytes = header_bytes.encode()
    raw(name, struct.pack("<Q", len(header_bytes) if n is None else n) + header_bytes + data)

def ent(dtype="F32", shape=(1,), off=(0, 4)):
    return {"dtype": dtype, "shape": list(shape), "data_offsets": list(off)}

def js(obj):
    return json.dumps(obj, separators=(",", ":"))

ok_header = js({"a": ent(), "b": ent(off=(4, 8))})

# truncated at every section
raw("empty", b"")
raw("truncated-length", b"\x10\x00\x00")
raw("length-only", struct.pack("<Q", 0))
hdr("truncated-header", ok_header[:20], n=len(ok_header))
hdr("truncated-data", ok_header, b"\x00" * 6)
hdr("length-cuts-json", ok_header, b"\x00" * 8, n=len(ok_header) - 10)
# header length
hdr("length-huge", "{}", n=1 << 63)
hdr("length-over-cap", "{}", n=100000001)
hdr("length-past-eof", "{}      ", n=1000)
# JSON shape of the header
hdr("json-array", "[]")
hdr("json-string", '"safetensors"')
hdr("json-invalid", '{"a":')
hdr("json-trailing", "{} x")
hdr("json-nul", b"{}\x00     ")
hdr("utf8-invalid", b'{"a\xff":' + js(ent()).encode() + b"}", b"\x00" * 4)
hdr("utf8-overlong", b'{"\xc0\xaf":' + js(ent()).encode() + b"}", b"\x00" * 4)
# entries
hdr("entry-not-object", '{"a":5}')
hdr("entry-unknown-key", '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"layout":"row"}}', b"\x00" * 4)
hdr("entry-missing-dtype", '{"a":{"shape":[1],"data_offsets":[0,4]}}', b"\x00" * 4)
hdr("entry-duplicate-key", '{"a":{"dtype":"F32","dtype":"F16","shape":[1],"data_offsets":[0,4]}}', b"\x00" * 4)
hdr("dtype-unknown", js({"a": ent(dtype="F17")}), b"\x00" * 4)
hdr("dtype-not-string", '{"a":{"dtype":4,"shape":[1],"data_offsets":[0,4]}}', b"\x00" * 4)
hdr("dtype-unsupported", js({"a": ent(dtype="F8_E8M0", off=(0, 1))}), b"\x00")
hdr("shape-not-array", '{"a":{"dtype":"F32","shape":3,"data_offsets":[0,4]}}', b"\x00" * 4)
hdr("shape-string-dim", '{"a":{"dtype":"F32","shape":["1"],"data_offsets":[0,4]}}', b"\x00" * 4)
hdr("shape-negative-dim", '{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}', b"\x00" * 4)
hdr("shape-fraction-dim", '{"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}}', b"\x00" * 4)
hdr("shape-float-dim", '{"a":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}}', b"\x00" * 4)
hdr("shape-too-many-dims", js({"a": ent(shape=[1] * 9)}), b"\x00" * 4)
hdr("shape-overflow", js({"a": ent(shape=[1 << 32, 1 << 32, 1 << 32], off=(0, 4))}), b"\x00" * 4)
hdr("bytes-overflow", js({"a": ent(shape=[1 << 31, 1 << 31, 2], off=(0, 4))}), b"\x00" * 4)
hdr("dim-too-large", '{"a":{"dtype":"U8","shape":[18446744073709551617],"data_offsets":[0,1]}}', b"\x00")
hdr("shape-array-huge", js({"a": ent(shape=[1] * 100)}), b"\x00" * 4)
hdr("nesting-too-deep", '{"__metadata__":{"a":[[[[1]]]]}}')
# data offsets
hdr("offsets-not-array", '{"a":{"dtype":"F32","shape":[1],"data_offsets":"0-4"}}', b"\x00" * 4)
hdr("offsets-three", js({"a": ent(off=(0, 4, 8))}), b"\x00" * 4)
hdr("offsets-negative", '{"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}}', b"\x00" * 4)
hdr("offsets-reversed", js({"a": ent(shape=[0], off=(8, 4))}), b"\x00" * 4)
hdr("size-mismatch", js({"a": ent(shape=[2], off=(0, 4))}), b"\x00" * 4)
hdr("overlap", js({"a": ent("U8", [8], (0, 8)), "b": ent("U8", [8], (4, 12))}), b"\x00" * 12)
hdr("gap", js({"a": ent(off=(0, 4)), "b": ent(off=(8, 12))}), b"\x00" * 12)
hdr("first-not-zero", js({"a": ent(off=(4, 8))}), b"\x00" * 8)
hdr("offsets-past-eof", js({"a": ent("U8", [16], (0, 16))}), b"\x00" * 8)
hdr("trailing-bytes", ok_header, b"\x00" * 9)
hdr("duplicate-tensor", '{"a":' + js(ent()) + ',"b":' + js(ent(off=(4, 8))) + ',"a":' + js(ent(off=(8, 12))) + "}", b"\x00" * 12)
# strings: tensor names without control characters, no raw control bytes (issue 31)
hdr("name-nul", '{"model.embed_tokens.weight\\u0000.evil":' + js(ent()) + "}", b"\x00" * 4)
hdr("name-escape", '{"a\\u001b[2J":' + js(ent()) + "}", b"\x00" * 4)
hdr("name-newline", '{"a\\nOK: all good":' + js(ent()) + "}", b"\x00" * 4)
hdr("name-del", '{"a\x7f":' + js(ent()) + "}", b"\x00" * 4)
hdr("string-raw-control", '{"__metadata__":{"format":"p\tt"}}')
# JSON as serde_json (the reference reader's) reads it: no byte order mark, no leading zeros
hdr("bom", b"\xef\xbb\xbf" + ok_header.encode(), b"\x00" * 8)
hdr("offsets-leading-zero", '{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,04]}}', b"\x00" * 4)
hdr("shape-leading-zero", '{"a":{"dtype":"F32","shape":[01],"data_offsets":[0,4]}}', b"\x00" * 4)
# __metadata__
hdr("metadata-not-object", '{"__metadata__":["format","pt"]}')
hdr("metadata-non-string", '{"__metadata__":{"format":"pt","version":2}}')
hdr("metadata-duplicate-key", '{"__metadata__":{"format":"pt","format":"np"}}')
hdr("metadata-twice", '{"__metadata__":{},"__metadata__":{}}')

for name, data in sorted(cases.items()):
    with open(os.path.join(here, name + ".safetensors"), "wb") as f:
        f.write(data)
print(len(cases), "files", file=sys.stderr)
