// tests/tokenizer/compare.mjs — transformers.js (@lenml/tokenizers) as the oracle for tq's tokenizer.
//
//   node compare.mjs golden TOKENIZER_DIR CORPUS OUT
//       encodes every corpus record (without special tokens) and writes the golden file:
//         tq-tokenizer-golden 1
//         records N
//         then per record two lines: the ids (comma-separated, empty for none), and "=" when
//         transformers.js decodes them back to the record, else "~" and its decoded text as JSON
//         (decoded with the cleanup of spaces when tokenizer_config.json says
//         clean_up_tokenization_spaces: true);
//         then "special" and, for the first SPECIAL records, their ids with add_special_tokens.
//   node compare.mjs bench TOKENIZER_DIR CORPUS
//       prints MB per CPU second (and per wall second) for encoding the corpus records one after
//       another on the main thread, after one warm-up pass.
//
// TOKENIZER_DIR holds tokenizer.json and tokenizer_config.json (an npm package's models/ folder).
import { readFileSync, writeFileSync } from "node:fs";
import { TokenizerLoader } from "@lenml/tokenizers";

const SPECIAL = 64;

function load(dir) {
  const tokenizerJSON = JSON.parse(readFileSync(`${dir}/tokenizer.json`, "utf8"));
  let tokenizerConfig = {};
  try {
    tokenizerConfig = JSON.parse(readFileSync(`${dir}/tokenizer_config.json`, "utf8"));
  } catch (e) {
    if (e.code !== "ENOENT") throw e;
  }
  return TokenizerLoader.fromPreTrained({ tokenizerJSON, tokenizerConfig });
}

function records(path) {
  const buf = readFileSync(path);
  const out = [];
  const dec = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
  let i = 0;
  while (i < buf.length) {
    const nl = buf.indexOf(10, i);
    const n = Number(buf.subarray(i, nl).toString("ascii"));
    out.push(dec.decode(buf.subarray(nl + 1, nl + 1 + n)));
    i = nl + 1 + n + 1;
  }
  return out;
}

const [mode, dir, corpus, out] = process.argv.slice(2);
const tok = load(dir);
const recs = records(corpus);
const plain = { add_special_tokens: false };
// transformers.js' own cleanup (tokenizers.js, clean_up_tokenization) when tokenizer_config.json
// asks for it (Llama 3's: true); without the key transformers.js would clean up too, where
// transformers (tokenization_utils_base.py) and tq do not, so the config's value is passed.
const cfg = (() => {
  try {
    return JSON.parse(readFileSync(`${dir}/tokenizer_config.json`, "utf8"));
  } catch (e) {
    if (e.code !== "ENOENT") throw e;
    return {};
  }
})();
const dopts = { skip_special_tokens: false, clean_up_tokenization_spaces: cfg.clean_up_tokenization_spaces === true };

if (mode === "golden") {
  const lines = ["tq-tokenizer-golden 1", `records ${recs.length}`];
  let exact = 0;
  for (const r of recs) {
    const ids = tok.encode(r, plain);
    lines.push(ids.join(","));
    const back = ids.length ? tok.decode(ids, dopts) : "";
    if (back === r) {
      exact++;
      lines.push("=");
    } else {
      lines.push("~" + JSON.stringify(back));
    }
  }
  lines.push("special");
  for (let i = 0; i < Math.min(SPECIAL, recs.length); i++) lines.push(tok.encode(recs[i], { add_special_tokens: true }).join(","));
  writeFileSync(out, lines.join("\n") + "\n");
  console.log(`${dir}: ${recs.length} records, ${exact} decode back exactly`);
} else if (mode === "bench") {
  const bytes = recs.reduce((s, r) => s + Buffer.byteLength(r, "utf8"), 0);
  // A first pass warms the JIT and the tokenizer's word cache, as a long-running process would be.
  for (const r of recs) tok.encode(r, plain);
  // CPU time of this process (so other load on the machine does not count), as tq's bench does.
  const c0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  let n = 0;
  for (const r of recs) n += tok.encode(r, plain).length;
  const c = process.cpuUsage(c0);
  const cpu = (c.user + c.system) / 1e6;
  const wall = Number(process.hrtime.bigint() - t0) / 1e9;
  console.log(`${(bytes / cpu / 1e6).toFixed(2)} MB/s per CPU second (${(bytes / wall / 1e6).toFixed(2)} MB/s wall), ${recs.length} records, ${bytes} bytes, ${n} tokens`);
} else {
  console.error("usage: compare.mjs golden DIR CORPUS OUT | bench DIR CORPUS");
  process.exit(2);
}
