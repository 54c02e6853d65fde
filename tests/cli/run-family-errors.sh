# tq-run on malformed configs and checkpoints of the hybrid, MLA and gpt-oss families: an
# unknown layer type, a missing state tensor, inconsistent head sizes each exit 1 with a
# message naming the key or tensor (the messages are pinned in the .stdout.exact file).
set -u
. "$ROOT/tests/lib/common.sh"
run tq-mkmodel --arch qwen3_5_moe --size tiny --seed 3 --quiet q
run tq-mkmodel --arch qwen3_next --size tiny --seed 4 --quiet n
run tq-mkmodel --arch deepseek_v3 --size tiny --seed 5 --quiet d
run tq-mkmodel --arch gpt_oss --size tiny --seed 6 --quiet g
decode() { expect_exit 1 tq-run "$1" --tokens 1,2 --max-tokens 2; }
# edit DIR SED-EXPRESSION: a copy DIR-N with config.json edited (the edit must change it)
n=0
edit() {
  n=$((n + 1)); cp -r "$1" "$1-$n"
  sed "$2" "$1/config.json" > "$1-$n/config.json"
  cmp -s "$1/config.json" "$1-$n/config.json" && fail "edit '$2' did not change $1/config.json"
  E="$1-$n"
}
# rename DIR OLD NEW: a copy DIR-N whose safetensors header calls tensor OLD NEW (same length)
rename() {
  n=$((n + 1)); cp -r "$1" "$1-$n"
  LC_ALL=C perl -0777 -pi -e "s/\"\Q$2\E\"/\"$3\"/" "$1-$n"/*.safetensors
  cmp -s "$1/model.safetensors" "$1-$n/model.safetensors" && fail "rename $2 did not change $1"
  E="$1-$n"
}
echo "# unknown layer types"
edit q 's/"linear_attention", "linear_attention"/"mamba_attention", "linear_attention"/'; decode "$E"
edit g 's/"sliding_attention"/"linear_attention"/'; decode "$E"
edit g 's/"sliding_window": [0-9]*/"sliding_window": 0/'; decode "$E"
echo "# missing state tensors"
rename n model.layers.0.linear_attn.A_log model.layers.0.linear_attn.A_lgX; decode "$E"
rename n model.layers.1.linear_attn.conv1d.weight model.layers.1.linear_attn.conv1d.weighX; decode "$E"
rename n model.layers.2.linear_attn.dt_bias model.layers.2.linear_attn.dt_biaX; decode "$E"
rename g model.layers.1.self_attn.sinks model.layers.1.self_attn.sinkX; decode "$E"
rename d model.layers.1.mlp.gate.e_score_correction_bias model.layers.1.mlp.gate.e_score_correction_biaX; decode "$E"
echo "# inconsistent head sizes"
edit q 's/"linear_num_value_heads": 4/"linear_num_value_heads": 3/'; decode "$E"
edit n 's/"num_key_value_heads": 2/"num_key_value_heads": 3/'; decode "$E"
edit d 's/"qk_rope_head_dim": 32/"qk_rope_head_dim": 31/'; decode "$E"
edit d 's/"kv_lora_rank": 64/"kv_lora_rank": 48/'; decode "$E"
edit n 's/"linear_key_head_dim": 32/"linear_key_head_dim": 16/'; decode "$E"
edit d 's/"n_group": 2/"n_group": 3/'; decode "$E"
echo "# an untied lm_head that is missing (not decoded with the embedding in its place)"
rename g lm_head.weight lm_head.weighX; decode "$E"
edit "$E" 's/"tie_word_embeddings": false,//'; decode "$E"
edit "$E" 's/{/{"tie_word_embeddings": true,/'
run tq-run --quiet "$E" --tokens 1,2 --max-tokens 2 >/dev/null # tied: the embedding is the lm_head
echo "# gemma4: what the decoder does not run is refused by name (Gemma 4 E2B/E4B's per-layer"
echo "# embeddings and shared KV layers, bidirectional attention, another activation, a device)"
run tq-mkmodel --arch gemma4 --size tiny --seed 7 --quiet m
edit m 's/"hidden_size_per_layer_input": 0/"hidden_size_per_layer_input": 256/'; decode "$E"
edit m 's/"hidden_size_per_layer_input": 0,//'; decode "$E"
edit m 's/"num_kv_shared_layers": 0/"num_kv_shared_layers": 1/'; decode "$E"
edit m 's/"use_bidirectional_attention": "vision"/"use_bidirectional_attention": "all"/'; decode "$E"
edit m 's/"gelu_pytorch_tanh"/"silu"/'; decode "$E"
edit m 's/"rope_type": "proportional"/"rope_type": "yarn"/'; decode "$E"
expect_exit 1 tq-run m --backend shim --tokens 1,2 --max-tokens 2
exit 0
