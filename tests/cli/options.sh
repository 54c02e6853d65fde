# The option tables of cmd/opts.c, the same for every tool: -h/--help/--version, "--opt VAL"
# and "--opt=VAL" alike, and one form of usage error (exit 2, nothing on stdout,
# "tq-NAME: ..." and "Try 'tq-NAME --help' ...") for an unknown, ambiguous or incomplete
# option and for a value out of range or not among the choices. The messages are goldened
# in options.stdout.exact.
set -u
. "$ROOT/tests/lib/common.sh"
usage_err() { expect_exit 2 "$@"; } # usage_err TOOL ARGS...

# -h is --help; --version; both exit 0 with nothing on stderr.
# Every tq-verify command, from the tool's own table (tq-verify --list-commands).
version=$(tq-convert --version | cut -d' ' -f3)
cmds=$(tq-verify --list-commands) && [ -n "$cmds" ] || fail "tq-verify --list-commands"
tools=(tq-convert tq-split tq-rowlayout tq-run tq-mkmodel tq-verify)
for c in $cmds; do tools+=("tq-verify $c"); done
for t in "${tools[@]}"; do
  $t -h >h.txt 2>err || fail "$t -h: exit $?"
  [ ! -s err ] || fail "$t -h: stderr: $(cat err)"
  $t --help >help.txt || fail "$t --help"
  cmp -s h.txt help.txt || fail "$t: -h and --help differ"
  head -n 1 h.txt | grep -q "^Usage: $t " || fail "$t -h: no usage line"
  grep -q '^  -h, --help ' h.txt || fail "$t -h: -h not listed"
  [ "$($t --version 2>&1)" = "${t%% *} (tq) $version" ] || fail "$t --version: $($t --version 2>&1)"
  # the first of --help and a usage error decides
  $t --bogus-option --help >/dev/null 2>&1; [ $? = 2 ] || fail "$t: unknown option before --help"
  $t --help --bogus-option >/dev/null 2>&1 || fail "$t: --help before an unknown option"
done

echo "# unknown, ambiguous and incomplete options"
usage_err tq-convert --bogus m o
usage_err tq-convert --bogus=3 m o
usage_err tq-convert -x m o
usage_err tq-convert --s 1 m o
usage_err tq-convert m o --bits
usage_err tq-convert --json=yes m o
usage_err tq-split m o --align
usage_err tq-rowlayout --out
usage_err tq-mkmodel --shared-expert=1 o
usage_err tq-run m --tokens
usage_err tq-run m --tokens=1 --resident=no
usage_err tq-verify --json
usage_err tq-verify ls --bogus x
usage_err tq-verify ls -z x
usage_err tq-verify pack d -o
usage_err tq-verify golden --golden=g.json --update=1 m
echo "# out of range, not a choice, not a size; the --opt=VAL form names the value the same way"
usage_err tq-convert --bits 9 m o
usage_err tq-convert --bits=9 m o
usage_err tq-convert --threads=-1 m o
usage_err tq-convert --seed 2147483648 m o
usage_err tq-convert --group-size=16 m o
usage_err tq-convert --scale=MAX m o
usage_err tq-convert --shard-size 0 m o
usage_err tq-convert --shard-size=lots m o
usage_err tq-split --align=3000 m o
usage_err tq-split --top-k=0 m o
usage_err tq-split --naming=HF2 --join s o
usage_err tq-rowlayout --chunk-size=2G x --out y
usage_err tq-rowlayout --page-align=12 x --out y
usage_err tq-mkmodel --seed=-1 o
usage_err tq-mkmodel --layers=0 o
usage_err tq-mkmodel --arch=gpt2 o
usage_err tq-mkmodel --rows 2000000000000 --arch ngram o
usage_err tq-run m --tokens=1,-2
usage_err tq-run m --tokens 1 --force-tokens=3,x
usage_err tq-run m --tokens=1 --max-tokens=0
usage_err tq-run m --tokens=1 --cache-budget=1Q
usage_err tq-run m --tokens=1 --io-threads 65
usage_err tq-verify manifest --threads=0 d
usage_err tq-verify check -t 999 d
usage_err tq-verify pack --level=20 d -o x.tar.zst
usage_err tq-verify golden --golden g.json --update --tokens=1,,2 m
usage_err tq-verify golden --golden g.json --update --max-tokens=0 m
[ ! -e o ] || fail "a usage error created o"

# "--opt=VAL" and "--opt VAL" give the same result; choices ignore case; "--" ends the
# options.
tq-mkmodel --arch=llama --seed=7 --layers=1 --dtype=F16 --quiet a || fail "mkmodel --opt=VAL"
tq-mkmodel --arch llama --seed 7 --layers 1 --dtype f16 --quiet b || fail "mkmodel --opt VAL"
tq-verify compare --quiet a b || fail "--opt=VAL and --opt VAL models differ"
grep -q '"num_hidden_layers": 1' a/config.json || fail "--layers=1 not applied"
tq-mkmodel --quiet --arch qwen3_moe -- -m || fail "mkmodel -- -m"
[ -f -m/config.json ] || fail "'--' did not end the options"
tq-split --quiet --align=4K --threads=2 -- -m s1 || fail "split --opt=VAL"
tq-split --quiet --align 4096 --threads 2 -- -m s2 || fail "split --opt VAL"
cmp -s s1/experts/layer_00.bin s2/experts/layer_00.bin || fail "split --align=4K differs from --align 4096"
tq-convert --quiet --bits=4 --group-size=32 --scale=RMS --bits-for='down_proj=2' a c1 || fail "convert --opt=VAL"
tq-convert --quiet --bits 4 --group-size 32 --scale rms --bits-for 'down_proj=2' a c2 || fail "convert --opt VAL"
tq-verify compare --quiet c1 c2 || fail "convert --opt=VAL differs"
grep -q '"bits": 4' c1/config.json && grep -q '"group_size": 32' c1/config.json || fail "convert values not applied"

# tq-run: --tokens=1,2 is --tokens 1,2 (it used to be refused)
tq-run --tokens=1,2 --max-tokens=3 --quiet a > r1 || fail "tq-run --tokens=1,2"
tq-run --tokens 1,2 --max-tokens 3 --quiet a > r2 || fail "tq-run --tokens 1,2"
cmp -s r1 r2 || fail "tq-run --tokens=1,2 and --tokens 1,2 differ: $(cat r1) / $(cat r2)"
grep -qx '[0-9]*,[0-9]*,[0-9]*' r1 || fail "tq-run output: $(cat r1)"
# tq-verify: short and --opt=VAL forms of a subcommand's options
tq-verify manifest -q -t 2 a || fail "manifest -q -t 2"
tq-verify check --threads=2 --quiet a || fail "check --threads=2"
tq-verify pack -q --level=5 a -o a.tar.zst || fail "pack --level=5"
tq-verify unpack --quiet --output=a2 a.tar.zst || fail "unpack --output=a2"
tq-verify compare -q a a2 || fail "unpacked model differs"
exit 0
