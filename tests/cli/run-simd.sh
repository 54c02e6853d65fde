# tq-run's SIMD matvec kernels (runtime/kernels.c: AVX-512F where the CPU has it, AVX2 with
# TQ_NO_AVX512=1) against the portable ones (TQ_NO_SIMD=1): logits byte for byte (cmp) on every
# kind they take — TurboQuant 2-, 3- and 4-bit (groups 32, 64, 128), MLX affine 4- and 8-bit,
# dense bf16, f16 and f32, gpt_oss (output biases, MXFP4 experts) — at 1 and 7
# threads (row ranges not multiples of the 4-row blocks) and streamed from a split. A
# consistency check (both paths are ours), which the AVX2 path must pass bit for bit.
set -eu
if grep -qw avx2 /proc/cpuinfo 2>/dev/null; then echo "AVX2 present: the SIMD path runs"; else echo "no AVX2: both runs take the portable path"; fi
tq-mkmodel --quiet --arch qwen3_moe --size tiny --seed 5 --shared-expert m
tq-mkmodel --quiet --arch llama --size tiny --seed 6 --dtype f32 m2
tq-mkmodel --quiet --arch gpt_oss --size tiny --seed 7 g
tq-mkmodel --quiet --arch llama --size tiny --seed 8 --dtype f16 m3
tq-convert --quiet --bits 4 --group-size 64 m q4
tq-convert --quiet --bits 2 --group-size 32 m q2
tq-convert --quiet --bits 3 --group-size 64 m q3
tq-convert --quiet --bits 4 --group-size 128 m2 q2b
tq-convert --quiet --method affine --bits 4 m a4
tq-convert --quiet --method affine --bits 8 m a8
tq-convert --quiet --bits 4 g gq
tq-split --quiet q4 q4s
n=0
for d in m m2 m3 g gq q4 q2 q3 q2b a4 a8 q4s; do
  for t in 1 7; do
    TQ_NO_SIMD=1 tq-run $d --tokens 1,2,3 --max-tokens 4 --threads $t --quiet --force --logits p.f32 > p.txt
    tq-run $d --tokens 1,2,3 --max-tokens 4 --threads $t --quiet --force --logits s.f32 > s.txt
    cmp p.f32 s.f32 || { echo "$d --threads $t: SIMD logits differ from the portable path's"; exit 1; }
    cmp p.txt s.txt
    TQ_NO_AVX512=1 tq-run $d --tokens 1,2,3 --max-tokens 4 --threads $t --quiet --force --logits s2.f32 > s2.txt
    cmp p.f32 s2.f32 || { echo "$d --threads $t: AVX2 logits differ from the portable path's"; exit 1; }
    n=$((n + 1))
  done
done
echo "$n decodes: SIMD and portable logits identical"
