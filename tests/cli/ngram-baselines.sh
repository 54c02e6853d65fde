# testdata/models/ngram.py, the n-gram baselines of docs/quality.md, against NLTK's language
# models (an independent implementation; Debian python3-nltk, scripts/install-deps ci): on a
# small corpus, its interpolated Kneser-Ney with one fixed discount gives every probability
# NLTK's KneserNeyInterpolated gives (nltk/lm/models.py InterpolatedLanguageModel.
# unmasked_score, nltk/lm/smoothing.py KneserNey), and its add-k every probability of NLTK's
# Lidstone (nltk/lm/models.py Lidstone.unmasked_score): correctness against an oracle. The
# parts NLTK does not have (a discount per order, n1 / (n1 + 2 n2); the unigram level's floor
# 1/V, which gives ids never seen a probability; a context never seen) are checked for
# consistency: every distribution, seen or unseen context, sums to 1 over the vocabulary.
set -u
. "$ROOT/tests/lib/common.sh"
if ! /usr/bin/python3 -c 'import nltk.lm' 2>/dev/null; then
  echo "ngram-baselines: no NLTK (python3-nltk): the oracle comparison was skipped" >&2
  exit 0
fi
/usr/bin/python3 - "$ROOT/testdata/models" <<'PY' || fail "ngram.py disagrees with NLTK or does not normalize"
import itertools, math, random, sys
sys.path.insert(0, sys.argv[1])
import ngram
from nltk.lm import KneserNeyInterpolated, Lidstone
from nltk.util import everygrams

V = 9
r = random.Random(5)
base = r.choices(range(V), weights=[30, 20, 12, 9, 7, 5, 3, 2, 1], k=600)
seq = base + base[:40]  # the first bigram also follows a token: NLTK's lower orders need that
assert len(set(seq)) == V
worst = 0.0
for order in (2, 3):
    def nltk_lm(lm):
        sq = [str(t) for t in seq]  # NLTK's vocabulary looks up strings
        lm.fit([list(everygrams(sq, max_len=order))], vocabulary_text=sq)
        return lm
    kn_ref = nltk_lm(KneserNeyInterpolated(order, discount=0.1))
    kn = ngram.KN(seq, order, v=V, fixed_discount=0.1)
    ak_ref = nltk_lm(Lidstone(0.5, order))
    ak = ngram.AddK(seq, order, 0.5, v=len(ak_ref.vocab))  # NLTK's vocabulary adds <UNK>
    n = 0
    for h in itertools.product(range(V), repeat=order - 1):
        for w in range(V):
            try:
                want = kn_ref.unmasked_score(str(w), tuple(map(str, h)))
            except ZeroDivisionError:  # NLTK: a middle token never seen inside a trigram
                continue
            worst = max(worst, abs(kn.p(list(h), w) - want) / want)
            worst = max(worst, abs(ak.p(list(h), w) - ak_ref.unmasked_score(str(w), tuple(map(str, h)))))
            n += 1
    assert n >= V ** order * 0.9, n
    assert worst < 1e-12, ("order", order, "differs from NLTK by", worst)
    # the distributions the baselines use: a discount per order and the 1/V floor, a
    # vocabulary larger than what the corpus has (ids never seen) and contexts never seen
    # (a Zipf-like corpus over 60 ids, so that every order has n-grams seen once and twice)
    z = r.choices(range(60), weights=[1 / (i + 1) for i in range(60)], k=300)
    for m in (ngram.KN(z, order, v=63), ngram.AddK(z, order, 0.01, v=63)):
        for h in itertools.product(range(63), repeat=order - 1):
            s = sum(m.p(list(h), w) for w in range(63))
            assert abs(s - 1) < 1e-12, (order, h, s)
            assert min(m.p(list(h), w) for w in range(63)) > 0, h
print("largest relative difference from NLTK: %.3g" % worst)
PY
echo "ngram.py: Kneser-Ney and add-k equal NLTK's on a small corpus; every distribution sums to 1"
