#!/usr/bin/python3
"""testdata/models/ngram.py — n-gram baselines for the test models: held-out perplexity of
bigram and trigram tables counted from the models' own training text.

Usage (from the repository root, after `make all` and `train.py corpus/encode WORKDIR`):

    python3 testdata/models/ngram.py WORKDIR [BYTES]

Training ids: WORKDIR/train.ids (train.py encode: the training text encoded by tq-run
--encode, documents joined by <|endoftext|>, id 0), exactly what the models were trained on.
Held-out ids: testdata/models/eval/python-doc-eval.txt (its first BYTES bytes if given, as
`head -c BYTES`) encoded by `tq-run --tokenizer testdata/models/qwen3-tiny --encode` (both
models carry the same tokenizer), the ids `tq-run --eval` feeds the models. Scored like `tq-run --eval` (runtime/decode.c tq_runner_eval): every
token but the first, given what precedes it (the trigram's first target, with one token of
context, uses the bigram estimate).

Smoothing, each over the vocabulary of 2048 ids (every id gets probability > 0):
- add-k (Lidstone; k = 1 is Laplace's add-one): P(w|h) = (c(h,w) + k) / (c(h) + k V),
  Chen & Goodman, "An Empirical Study of Smoothing Techniques for Language Modeling",
  Harvard TR-10-98 (1998), section 2.1, eq. 3. k = 1 and k = 0.01, fixed in advance (not
  fitted on the held-out text).
- interpolated Kneser-Ney, Chen & Goodman TR-10-98 section 3.5 (eq. 15-17; the
  interpolated form of section 5.4): one absolute discount per order,
  D = n1 / (n1 + 2 n2) (Ney, Essen and Kneser 1994; TR-10-98 eq. 14) with n1, n2 the
  numbers of n-grams of that order seen once and twice (continuation counts for the lower
  orders); the highest order uses counts, the lower orders continuation counts N1+(. w...);
  the unigram level interpolates with the uniform distribution 1/V. A context never seen
  falls back to the next lower order entirely.

Deterministic: integer counts, sums in held-out order, no randomness."""
import math
import os
import struct
import subprocess
import sys
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train  # noqa: E402  (tq_encode, VOCAB; torch is imported only when training)

V = train.VOCAB


def discount(counts):
    c = Counter(counts.values())
    n1, n2 = c.get(1, 0), c.get(2, 0)
    if n1 == 0:
        raise ValueError("no n-gram seen once: the discount n1 / (n1 + 2 n2) is undefined")
    return n1 / (n1 + 2 * n2)


class KN:
    """Interpolated Kneser-Ney up to order 3 (orders 1..N, N = 2 or 3)."""

    def __init__(self, ids, order, v=V, fixed_discount=None):
        """fixed_discount: one D for every order in place of n1 / (n1 + 2 n2) (for the test
        against NLTK, whose KneserNeyInterpolated takes one)"""
        self.order, self.v = order, v
        disc = (lambda c: fixed_discount) if fixed_discount is not None else discount
        big = Counter(zip(ids, ids[1:]))
        tri = Counter(zip(ids, ids[1:], ids[2:])) if order == 3 else None
        # the highest order: counts; lower orders: continuation counts (distinct left words)
        top = tri if order == 3 else big
        self.top = top
        self.top_ctx = Counter()
        self.top_types = Counter()  # N1+(h .)
        for g, n in top.items():
            self.top_ctx[g[:-1]] += n
            self.top_types[g[:-1]] += 1
        self.d_top = disc(top)
        # unigram continuation counts N1+(. w) over the distinct bigrams
        self.uni = Counter(w for (_, w) in big)
        self.uni_total = len(big)  # N1+(. .)
        self.d_uni = disc(self.uni)
        if order == 3:
            # bigram continuation counts N1+(. v w) over the distinct trigrams
            self.mid = Counter((v, w) for (_, v, w) in tri)
            self.mid_ctx = Counter()  # N1+(. v .)
            self.mid_types = Counter()  # N1+(v .) among the continuation bigrams
            for (v, w), n in self.mid.items():
                self.mid_ctx[v] += n
                self.mid_types[v] += 1
            self.d_mid = disc(self.mid)

    def p_uni(self, w):
        n_types = len(self.uni)
        return (max(self.uni.get(w, 0) - self.d_uni, 0) + self.d_uni * n_types / self.v) / self.uni_total

    def p_mid(self, v, w):
        """the bigram level of a trigram model: continuation counts"""
        c = self.mid_ctx.get(v, 0)
        if c == 0:
            return self.p_uni(w)
        return (max(self.mid.get((v, w), 0) - self.d_mid, 0) + self.d_mid * self.mid_types[v] * self.p_uni(w)) / c

    def p(self, h, w):
        lower = (lambda: self.p_uni(w)) if self.order == 2 else (lambda: self.p_mid(h[-1], w))
        if len(h) < self.order - 1:  # too little context: the next lower order
            return self.p_mid(h[-1], w) if self.order == 3 else self.p_uni(w)
        h = tuple(h[-(self.order - 1):])
        c = self.top_ctx.get(h, 0)
        if c == 0:
            return lower()
        return (max(self.top.get(h + (w,), 0) - self.d_top, 0) + self.d_top * self.top_types[h] * lower()) / c


class AddK:
    def __init__(self, ids, order, k, v=V):
        self.order, self.k, self.v = order, k, v
        self.g = Counter(zip(*[ids[i:] for i in range(order)]))
        self.ctx = Counter()  # c(h): the context's count before a next token
        for g, n in self.g.items():
            self.ctx[g[:-1]] += n
        self.lower = AddK(ids, order - 1, k, v) if order > 2 else None

    def p(self, h, w):
        if len(h) < self.order - 1:
            return self.lower.p(h, w)
        h = tuple(h[-(self.order - 1):])
        return (self.g.get(h + (w,), 0) + self.k) / (self.ctx.get(h, 0) + self.k * self.v)


def perplexity(model, ev, order):
    nll = 0.0
    for t in range(1, len(ev)):
        nll -= math.log(model.p(ev[max(0, t - order + 1):t], ev[t]))
    return math.exp(nll / (len(ev) - 1))


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    work = sys.argv[1]
    with open(os.path.join(work, "train.ids"), "rb") as f:
        raw = f.read()
    ids = list(struct.unpack("<%dH" % (len(raw) // 2), raw))
    with open(os.path.join(HERE, "eval", "python-doc-eval.txt"), "rb") as f:
        text = f.read()
    if len(sys.argv) == 3:
        text = text[:int(sys.argv[2])]
    r = subprocess.run([os.path.join(train.ROOT, "bin", "tq-run"), "--tokenizer", os.path.join(HERE, "qwen3-tiny"),
                        "--encode"], input=text, stdout=subprocess.PIPE, check=True)
    ev = [int(x) for x in r.stdout.decode().strip().split(",")]
    print("ngram: %d training tokens, held-out text %d bytes, %d tokens (%d scored), vocabulary %d" % (len(ids), len(text), len(ev), len(ev) - 1, V))
    print("| model | smoothing | held-out perplexity |")
    print("|---|---|---|")
    for order in (2, 3):
        name = "bigram" if order == 2 else "trigram"
        for k in (1.0, 0.01):
            print("| %s | add-k, k = %g | %.3f |" % (name, k, perplexity(AddK(ids, order, k), ev, order)), flush=True)
        kn = KN(ids, order)
        print("| %s | interpolated Kneser-Ney (D = %.4f) | %.3f |" % (name, kn.d_top, perplexity(kn, ev, order)), flush=True)


if __name__ == "__main__":
    main()
