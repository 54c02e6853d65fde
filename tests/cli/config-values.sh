# One malformed config.json per key the readers use (tq_family_config_check, the one
# validation pass): tq-run, tq-split and tq-convert each exit 1 within 10 s with a message
# naming the key and its value, and write nothing (no output, no OUT.partial-*).
# Table: BASE KEY VALUE TEXT. KEY is set to the JSON VALUE in text_config when the config
# has one, else at the top level (a.b sets b inside object a); TEXT must appear in stderr.
. "$ROOT/tests/lib/common.sh"
run tq-mkmodel --quiet --seed 1 --layers 2 q                    # qwen3_moe
run tq-mkmodel --quiet --seed 2 --arch qwen3_next n
run tq-mkmodel --quiet --seed 3 --arch qwen3_5_moe t            # keys under text_config
run tq-mkmodel --quiet --seed 4 --arch deepseek_v3 d
run tq-mkmodel --quiet --seed 5 --arch gpt_oss g
run tq-mkmodel --quiet --seed 6 --arch mixtral x
run tq-mkmodel --quiet --seed 7 --arch llama l

table=$(cat <<'EOF'
q model_type 5 "model_type" is 5: must be a non-empty string
q model_type "" "model_type" is "": must be a non-empty string
q text_config "x" "text_config" is "x": must be an object or null
t model_type ["qwen3_5_moe_text"] "text_config.model_type" is ["qwen3_5_moe_text"]: must be a non-empty string
q rms_norm_eps 0 "rms_norm_eps" is 0: must be a finite number in (0, 1]
q rms_norm_eps -1e-06 "rms_norm_eps" is -1e-06:
q rms_norm_eps 2 "rms_norm_eps" is 2:
q rms_norm_eps "1e-6" "rms_norm_eps" is "1e-6":
q rope_theta 0 "rope_theta" is 0: must be a finite number in (1, 1e+12]
q rope_theta -10000 "rope_theta" is -10000:
q rope_theta 1e13 "rope_theta" is 10000000000000:
q hidden_size 0 "hidden_size" is 0: must be an integer in [1,
q num_hidden_layers 0 "num_hidden_layers" is 0:
q num_attention_heads 0 "num_attention_heads" is 0:
q num_key_value_heads 3 "num_key_value_heads" is 3: must divide num_attention_heads 4
q num_key_value_heads 0 "num_key_value_heads" is 0:
q head_dim 31 "head_dim" is 31: must be even
q head_dim 0 "head_dim" is 0:
q vocab_size 0 "vocab_size" is 0:
q vocab_size 1.5 "vocab_size" is 1.5:
q intermediate_size -1 "intermediate_size" is -1:
q max_position_embeddings 0 "max_position_embeddings" is 0:
q num_experts 70000 "num_experts" is 70000:
q num_experts_per_tok 9 "num_experts_per_tok" is 9: must be in [1, 8] (num_experts is 8
q num_experts_per_tok 0 "num_experts_per_tok" is 0:
q moe_intermediate_size 0 "moe_intermediate_size" is 0:
q decoder_sparse_step 0 "decoder_sparse_step" is 0:
q mlp_only_layers [5] "mlp_only_layers" is 5: is not a layer number below num_hidden_layers 2
q mlp_only_layers "0" "mlp_only_layers" is "0": must be a list
q layer_types ["full_attention"] "layer_types" is ["full_attention"]: lists 1 layers, num_hidden_layers is 2
q layer_types ["full_attention","mamba"] layer_types[1] is "mamba"
q sliding_window -1 "sliding_window" is -1:
q tie_word_embeddings "yes" "tie_word_embeddings" is "yes": must be true or false
q norm_topk_prob 1 "norm_topk_prob" is 1: must be true or false
q rope_scaling "linear" "rope_scaling" is "linear": must be an object or null
q rope_scaling {"type":"linear","factor":0} "rope_scaling.factor" is 0:
q rope_scaling {"type":"linear"} "rope_scaling.type" is "linear": needs a positive "factor"
q rope_scaling {"rope_type":"yarn","factor":4,"beta_fast":0} "rope_scaling.beta_fast" is 0:
q rope_scaling {"rope_type":"yarn","factor":4,"mscale":-1} "rope_scaling.mscale" is -1:
q rope_scaling {"rope_type":"yarn","factor":4,"original_max_position_embeddings":0} "rope_scaling.original_max_position_embeddings" is 0:
q rope_scaling {"rope_type":"yarn","factor":4,"truncate":0} "rope_scaling.truncate" is 0:
q quantization {"bits":0,"group_size":64} "quantization.bits" is 0:
q quantization {"bits":4,"group_size":0} "quantization.group_size" is 0:
l rope_scaling {"rope_type":"llama3","factor":8,"low_freq_factor":4,"high_freq_factor":1} "rope_scaling.high_freq_factor" is 1: high_freq_factor 1 must exceed low_freq_factor 4
l rope_scaling {"rope_type":"llama3","factor":8,"low_freq_factor":5} "rope_scaling.low_freq_factor" is 5:
n partial_rotary_factor 0 "partial_rotary_factor" is 0: must be a finite number in (0, 1]
n partial_rotary_factor 1.5 "partial_rotary_factor" is 1.5:
n partial_rotary_factor 0.01 "partial_rotary_factor" is 0.01: leaves no rotary dims of head_dim 64
n linear_num_value_heads 3 "linear_num_value_heads" is 3: must be a multiple of linear_num_key_heads 2
n linear_num_key_heads 0 "linear_num_key_heads" is 0:
n linear_key_head_dim 0 "linear_key_head_dim" is 0:
n linear_value_head_dim 0 "linear_value_head_dim" is 0:
n linear_conv_kernel_dim 65 "linear_conv_kernel_dim" is 65:
n full_attention_interval 0 "full_attention_interval" is 0:
n shared_expert_intermediate_size -1 "shared_expert_intermediate_size" is -1:
t rms_norm_eps 0 "rms_norm_eps" is 0:
t rope_parameters "x" "rope_parameters" is "x": must be an object or null
t rope_parameters.rope_theta 0 "rope_parameters.rope_theta" is 0:
t rope_parameters.partial_rotary_factor 2 "rope_parameters.partial_rotary_factor" is 2:
d kv_lora_rank 0 "kv_lora_rank" is 0:
d q_lora_rank -1 "q_lora_rank" is -1:
d qk_nope_head_dim 0 "qk_nope_head_dim" is 0:
d qk_rope_head_dim 31 "qk_rope_head_dim" is 31: must be even
d v_head_dim 0 "v_head_dim" is 0:
d n_group 3 "n_group" is 3: must divide n_routed_experts 8
d n_group 0 "n_group" is 0:
d topk_group 3 "topk_group" is 3: must not exceed n_group 2
d routed_scaling_factor 0 "routed_scaling_factor" is 0:
d first_k_dense_replace 9 "first_k_dense_replace" is 9:
d moe_layer_freq 0 "moe_layer_freq" is 0:
d n_shared_experts -1 "n_shared_experts" is -1:
d num_experts_per_tok 9 "num_experts_per_tok" is 9: must be in [1, 8] (n_routed_experts is 8
g sliding_window 0 "sliding_window" is 0: sliding_attention layers need a positive window
g swiglu_limit 0 "swiglu_limit" is 0:
g num_local_experts 70000 "num_local_experts" is 70000:
x sliding_window 0 "sliding_window" is 0: sliding_attention layers need a positive window
EOF
)

# edit BASE KEY VALUE: a copy c/ of BASE with KEY set to VALUE
edit() {
  rm -rf c; cp -r "$1" c
  python3 - c/config.json "$2" "$3" <<'PY' || fail "could not edit $2"
import json, sys
p, key, val = sys.argv[1], sys.argv[2], sys.argv[3]
c = json.load(open(p))
o = c.get("text_config", c)
*outer, last = key.split(".")
for k in outer:
    o = o.setdefault(k, {}) if isinstance(o.get(k), dict) or k not in o else o[k]
o[last] = json.loads(val)
open(p, "w").write(json.dumps(c, indent=2))
PY
}

n=0
while read -r base key value text; do
  [ -n "$base" ] || continue
  edit "$base" "$key" "$value"
  rm -rf o
  expect_refused "$text" - tq-run c --tokens 1,2 --max-tokens 1
  expect_refused "$text" o tq-split --quiet c o
  expect_refused "$text" o tq-convert --quiet c o
  # the message names the directory and config.json
  grep -qF "c: config.json: " err || fail "$key=$value: message does not name c: config.json: $(cat err)"
  n=$((n + 1))
done <<<"$table"

# Non-finite numbers: NaN and Infinity as Python's json module writes them are not JSON (the
# reader refuses the file, naming it and the byte); an overflowing literal (1e999) reads as
# infinite and is refused by key.
for case in "NaN:c/config.json: invalid JSON near byte" "Infinity:c/config.json: invalid JSON near byte" \
  "-Infinity:c/config.json: invalid JSON near byte" "1e999:\"rope_theta\" is Infinity: must be a finite" \
  "-1e999:\"rope_theta\" is -Infinity:"; do
  v=${case%%:*} text=${case#*:}
  rm -rf c o; cp -r q c
  sed -i "s/\"rope_theta\": [0-9.e+]*/\"rope_theta\": $v/" c/config.json
  grep -q "\"rope_theta\": $v," c/config.json || fail "could not write rope_theta $v"
  expect_refused "$text" - tq-run c --tokens 1,2 --max-tokens 1
  expect_refused "$text" o tq-split --quiet c o
  expect_refused "$text" o tq-convert --quiet c o
  n=$((n + 1))
done

# and every unedited model still passes all three
for base in q n t d g x l; do
  tq-run "$base" --tokens 1,2 --max-tokens 1 >/dev/null || fail "$base: tq-run refused the unedited model"
done
echo "$n malformed configs refused by tq-run, tq-split and tq-convert, each naming the key"
