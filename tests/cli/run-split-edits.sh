# Edits to a split's small files and to config.json's streaming block are refused when the
# split is opened (tq-run, tq-split --join, tq-verify compare): exit 1 naming the file and the key.
# Two kinds of edit: (a) the file changed, split.json not: its files.NAME.sha256 catches it;
# (b) split.json's record rewritten to match (what a careless hand edit or a copy from another
# split gives): the streaming block is checked against split.json and the layer files.
# Consistency test: the expected values are tq-split's own (man tq-formats(5), split.json and
# config.json streaming block).
set -u
. "$ROOT/tests/lib/common.sh"
tq-mkmodel --arch qwen3_moe --size tiny --seed 8 m >/dev/null || exit 1
tq-split --quiet m s || exit 1
tq-run s --tokens 1,2 --max-tokens 3 --quiet >/dev/null || fail "the unedited split does not decode"

# edit DIR PYTHON-STATEMENT [rehash]: apply the statement to config.json's dict c (a copy of s);
# with rehash, split.json records the edited file's size and SHA-256.
edit() {
  rm -rf "$1" && cp -r s "$1" || exit 1
  python3 - "$1" "$2" "${3:-}" <<'EOF' || fail "could not edit $1"
import hashlib, json, sys
d, stmt, rehash = sys.argv[1:4]
c = json.load(open(d + "/config.json"))
st = c["streaming"]
exec(stmt)
data = json.dumps(c, indent=2, sort_keys=True).encode()
open(d + "/config.json", "wb").write(data)
if rehash:
    sj = json.load(open(d + "/split.json"))
    sj["files"]["config.json"] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    open(d + "/split.json", "w").write(json.dumps(sj, indent=2, sort_keys=True))
EOF
}
refused() { # refused PATTERN DIR: every reader of a split refuses DIR, naming PATTERN
  expect_msg 1 "$1" tq-run "$2" --tokens 1,2 --max-tokens 3 --check-blocks
  expect_msg 1 "$1" tq-split --join "$2" "j-$2"
  [ ! -e "j-$2" ] || fail "--join of $2 left an output"
  expect_msg 1 "$1" tq-verify compare m "$2"
}

# (a) config.json edited, split.json not: 2 -> 1 experts per token everywhere it is said
edit a1 'c["num_experts_per_tok"] = 1; st["experts_per_tok"] = 1'
refused 'a1/config.json: .* split.json.s files."config.json"' a1
edit a2 'c["rms_norm_eps"] = 1e-5'
refused 'a2/config.json: .*changed after the split was made' a2
# the issue's case, the size kept: 2 -> 1 experts per token in config.json by sed; and an edit
# no other check sees (the norm epsilon), also in place
rm -rf a4 && cp -r s a4 && sed -i 's/"num_experts_per_tok": 2/"num_experts_per_tok": 1/' a4/config.json
cmp -s s/config.json a4/config.json && fail "could not edit a4/config.json"
refused 'a4/config.json: content does not match split.json.s files."config.json".sha256' a4
rm -rf a5 && cp -r s a5 && sed -i 's/"rms_norm_eps": 1e-06/"rms_norm_eps": 2e-06/' a5/config.json
cmp -s s/config.json a5/config.json && fail "could not edit a5/config.json"
refused 'a5/config.json: content does not match split.json.s files."config.json".sha256' a5
# a tokenizer edited (tq-run encodes prompts with it)
rm -rf a3 && cp -r s a3 && printf ' ' >> a3/tokenizer.json
refused 'tokenizer.json: 14565 bytes, but split.json.s files."tokenizer.json".size is 14564' a3

# (b) split.json rewritten to match: the streaming block against split.json and the layer files
edit b1 'st["page_size"] = 0' rehash
refused 'streaming.page_size is 0 but split.json.s align is 16384' b1
edit b2 'st["page_size"] = 4096' rehash
refused 'streaming.page_size is 4096' b2
edit b3 'st["experts_per_tok"] = 64' rehash
refused 'streaming.experts_per_tok' b3
edit b4 'st["format"] = "flash_aligned_v1"' rehash
refused 'streaming.format is "flash_aligned_v1" but split.json.s kind moe is moe_flash_v1' b4
edit b5 'st["manifest"] = "other.json"' rehash
refused 'streaming.manifest is "other.json"' b5
edit b6 'del st["manifest"]' rehash
refused 'streaming.manifest is missing' b6
edit b7 'st["pinned_file"] = "tokenizer.json"' rehash
refused 'streaming.pinned_file' b7
edit b8 'st["num_layers"] = 1' rehash
refused 'streaming.num_layers' b8
edit b9 'st["num_experts"] = "8"' rehash
refused 'config.json: .*num_experts.* integer' b9
# the layer files read from another directory (a copy of them: same bytes, not split.json's files)
edit b10 'st["expert_dir"] = "other/"' rehash
cp -r b10/experts b10/other
refused 'streaming.expert_dir "other/": layer 0 would be read from' b10
edit b11 'st["ffn_dir"] = "ffn_aligned/"' rehash
refused 'streaming.ffn_dir in a MoE split' b11
edit b12 'c["num_experts_per_tok"] = 1; st["experts_per_tok"] = 1' rehash
refused 'streaming.experts_per_tok is 1 but split.json.s experts_per_tok is 2' b12
edit b13 'c["num_experts_per_tok"] = 1' rehash
refused 'config.json: num_experts_per_tok is 1 but split.json.s experts_per_tok is 2' b13
# the edits above were all refused and the untouched split still opens everywhere
tq-split --quiet --join s j-s || fail "join of the untouched split failed"
tq-verify compare --quiet m s || fail "compare of the untouched split failed"
exit 0
