# HuggingFace cache inputs, offline: ORG/NAME through HF_HOME (and HF_HUB_CACHE), or the
# cache directory models--ORG--NAME, convert and split exactly as the snapshot directory
# does. The cache is laid out as huggingface_hub writes it: blobs/ holding the files,
# snapshots/REV/ holding relative symbolic links to them, refs/main holding REV.
. "$ROOT/tests/lib/safety.sh"
run tq-mkmodel --quiet --seed 6 m
hub=$PWD/hf/hub repo=$PWD/hf/hub/models--acme--tiny-moe rev=0123456789abcdef0123456789abcdef01234567
mkdir -p "$repo/blobs" "$repo/refs" "$repo/snapshots/$rev"
for f in m/*; do
  b=$(sha256sum "$f" | cut -d' ' -f1)
  cp "$f" "$repo/blobs/$b"
  ln -s "../../blobs/$b" "$repo/snapshots/$rev/$(basename "$f")"
done
printf '%s' "$rev" >"$repo/refs/main"
run tq-convert --quiet m ref
HF_HOME=$PWD/hf run tq-convert --quiet acme/tiny-moe by-id
HF_HUB_CACHE=$hub HF_HOME=/nonexistent run tq-convert --quiet acme/tiny-moe by-hub-cache
run tq-convert --quiet "$repo" by-dir
for d in by-id by-hub-cache by-dir; do
  [ "$(model_hash ref)" = "$(model_hash $d)" ] || fail "$d differs from converting the model directory"
  grep -q '"revision": "'$rev'"' $d/tq-provenance.json || fail "$d: provenance lacks the revision"
  grep -q '"repo": "acme/tiny-moe"' $d/tq-provenance.json || fail "$d: provenance lacks the repo"
done
tq-split --plan --ram 64G m >plan-ref || fail "split --plan of the model directory"
HF_HOME=$PWD/hf tq-split --plan --ram 64G acme/tiny-moe >plan-id || fail "split --plan acme/tiny-moe"
sed "s|$repo/snapshots/$rev|m|" plan-id | cmp -s - plan-ref || fail "split --plan by id differs: $(diff plan-ref plan-id)"
# The tools that read a model without writing one take the same names: tq-verify ls,
# compare and quality, and tq-run, by id and by cache directory, give what the snapshot's
# model directory gives.
tq-verify ls m >ls-ref || fail "ls m"
HF_HOME=$PWD/hf tq-verify ls acme/tiny-moe >ls-id || fail "ls acme/tiny-moe: $(cat ls-id)"
cmp -s ls-ref ls-id || fail "tq-verify ls by id differs: $(diff ls-ref ls-id | head -5)"
tq-verify ls "$repo" >ls-dir || fail "ls $repo"
cmp -s ls-ref ls-dir || fail "tq-verify ls by cache directory differs"
HF_HOME=$PWD/hf run tq-verify compare --quiet acme/tiny-moe m
run tq-verify compare --quiet m "$repo"
HF_HOME=$PWD/hf run tq-verify quality --quiet acme/tiny-moe ref
tq-run m --tokens 1,2,3 --max-tokens 4 --quiet >run-ref || fail "tq-run m"
HF_HOME=$PWD/hf tq-run acme/tiny-moe --tokens 1,2,3 --max-tokens 4 --quiet >run-id || fail "tq-run acme/tiny-moe"
cmp -s run-ref run-id || fail "tq-run by id: $(cat run-id), the model directory: $(cat run-ref)"
tq-run "$repo" --tokens 1,2,3 --max-tokens 4 --quiet >run-dir || fail "tq-run $repo"
cmp -s run-ref run-dir || fail "tq-run by cache directory differs"
# Not in the cache, or a cache entry without its snapshot: say so, write nothing.
HF_HOME=$PWD/hf expect_exit 1 tq-convert acme/absent out1 | sed "s|$PWD|.|g"
rm "$repo/refs/main"
expect_exit 1 tq-convert "$repo" out2 | sed "s|$PWD|.|g"
printf 'fedcba' >"$repo/refs/main"
expect_exit 1 tq-convert "$repo" out3 | sed "s|$PWD|.|g"
[ ! -e out1 ] && [ ! -e out2 ] && [ ! -e out3 ] || fail "an output was written"
echo "HF cache: by id, by hub cache, by directory = the snapshot's conversion"
