# tq-run's AVX2 matvec kernels (runtime/kernels.c) against the portable ones (TQ_NO_SIMD=1):
# logits byte for byte (cmp) on every kind they take — TurboQuant 2- and 4-bit (groups 32, 64,
# 128), MLX affine 4- and 8-bit, dense bf16 and f32, gpt_oss (output biases; its MXFP4 experts stay portable) — at 1 and 7
# threads (row ranges not multiples of the 4-row blocks) and streamed from a split. A
# consistency check (both paths are ours), which the AVX2 path must pass bit for bit.
set -eu
if grep -qw avx2 /proc/cpuinfo 2>/dev/null; then echo "AVX2 present: the SIMD path runs"; else echo "no AVX2: both runs take the portable path"; fi
tq-mkmodel --quiet --arch qwen3_moe --size tiny --seed 5 --shared-expert m
tq-mkmodel --quiet --arch llama --size tiny --seed 6 --dtype f32 m2
tq-mkmodel --quiet --arch gpt_oss --size tiny --seed 7 g
tq-convert --quiet --bits 4 --group-size 64 m q4
tq-convert --quiet --bits 2 --group-size 32 m q2
tq-convert --quiet --bits 4 --group-size 128 m2 q2b
tq-convert --quiet --method affine --bits 4 m a4
tq-convert --quiet --method affine --bits 8 m a8
tq-convert --quiet --bits 4 g gq
tq-split --quiet q4 q4s
n=0
for d in m m2 g gq q4 q2 q2b a4 a8 q4s; do
  for t in 1 7; do
    TQ_NO_SIMD=1 tq-run $d --tokens 1,2,3 --max-tokens 4 --threads $t --quiet --force --logits p.f32 > p.txt
    tq-run $d --tokens 1,2,3 --max-tokens 4 --threads $t --quiet --force --logits s.f32 > s.txt
    cmp p.f32 s.f32 || { echo "$d --threads $t: SIMD logits differ from the portable path's"; exit 1; }
    cmp p.txt s.txt
    n=$((n + 1))
  done
done
echo "$n decodes: SIMD and portable logits identical"
