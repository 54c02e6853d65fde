// tests/chat/differential.mjs N SEED OUT.jsonl: random templates (statements, expressions, filters,
// tests and methods over fixed variables, splices into the snippets and real templates, and token
// soup for the lexer: tags with "-", unicode white space, escapes, numbers) with
// what @huggingface/jinja renders of each, or its error, one JSON line each ({tmpl, vars, out} or
// {tmpl, vars, error}). tests/chat/oracle.sh has build/tests/test_chat_template compare tq with
// them (TQ_CHAT_DIFF): same output, or both failing, or tq refusing a construct as unsupported.
import { Template } from "@huggingface/jinja";
import path from "node:path";
const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), "../..");
import fs from "node:fs";
const epoch = 1700000000 * 1000;
const RealDate = Date;
globalThis.Date = class extends RealDate { constructor(...a) { super(...(a.length ? a : [epoch])); } };
const RealDTF = Intl.DateTimeFormat;
Intl.DateTimeFormat = function (l, o) { return new RealDTF(l ?? "en-US", { timeZone: "UTC", ...o }); };
let seed = Number(process.argv[3] ?? 1);
seed = (seed * 2654435761) >>> 0 || 1;
const rnd = () => { seed ^= seed << 13; seed >>>= 0; seed ^= seed >>> 17; seed ^= seed << 5; seed >>>= 0; return seed / 4294967296; };
const pick = (a) => a[Math.floor(rnd() * a.length)];
const text = fs.readFileSync(ROOT + "/tests/chat/snippets.txt", "utf8");
const snippets = text.split(/^#### /m).slice(1).map((p) => { const nl = p.indexOf("\n"); const h = p.slice(0, nl); const sp = h.indexOf(" "); return { vars: sp < 0 ? "{}" : h.slice(sp + 1), body: p.slice(nl + 1) }; });
for (const f of ["qwen3.jinja", "gptoss.jinja"]) snippets.push({ vars: null, body: fs.readFileSync(ROOT + "/tests/fuzz/corpus/chat_template/" + f, "utf8") });
const msgvars = JSON.stringify({ messages: [{ role: "system", content: "S \"q\" \n" }, { role: "user", content: "U {{x}} é😀 " }, { role: "assistant", content: "<think>r</think>\n\nA", reasoning_content: null }, { role: "user", content: "" }], add_generation_prompt: true, bos_token: "<s>", xs: [3, 1, 2], d: { k: null, s: "x", l: [1], n: 2.5 }, s: " Hi, there ", n: 3, x: 1.5 });
const atoms = ["messages", "xs", "d", "d.k", "d.s", "d.l", "d.n", "s", "n", "x", "loop.index", "loop.first", "1", "0", "-1", "2.5", "'a'", "\"b\"", "none", "true", "false", "[]", "{}", "[1, 'x']", "{'k': 1}", "(1, 2)", "messages[0]", "messages[-1].content", "s[1:]", "s[::-1]", "xs[1]", "d['s']", "namespace(a=1)", "range(3)", "s|trim", "xs|length", "d.s ~ n"];
const ops = [" + ", " - ", " * ", " / ", " // ", " % ", " ** ", " ~ ", " == ", " != ", " < ", " >= ", " and ", " or ", " in ", " not in "];
const filters = ["length", "trim", "tojson", "first", "last", "reverse", "list", "join", "join(', ')", "string", "int", "float", "abs", "items", "upper", "lower", "title", "capitalize", "default('z')", "default('z', true)", "indent(2)", "replace('a', 'b')", "tojson(indent=2)", "map(attribute='role')", "selectattr('role', 'equalto', 'user')", "safe", "unique", "sort", "count", "keys", "values"];
const tests = ["defined", "undefined", "none", "string", "number", "integer", "iterable", "mapping", "sequence", "boolean", "true", "false", "odd", "even", "callable", "lower"];
const methods = ["strip()", "lstrip('\\n')", "rstrip()", "split()", "split(',')", "split(' ', 1)", "startswith('H')", "endswith(('e', 'x'))", "upper()", "lower()", "title()", "replace('e', 'E')", "get('s')", "get('zz', 1)", "items()", "keys()", "values()", "length"];
function expr(depth) {
	const r = rnd();
	if (depth > 2 || r < 0.3) return pick(atoms);
	if (r < 0.5) return expr(depth + 1) + pick(ops) + expr(depth + 1);
	if (r < 0.6) return expr(depth + 1) + "|" + pick(filters);
	if (r < 0.68) return expr(depth + 1) + " is " + (rnd() < 0.3 ? "not " : "") + pick(tests);
	if (r < 0.78) return pick(atoms) + "." + pick(methods);
	if (r < 0.84) return "not " + expr(depth + 1);
	if (r < 0.9) return "(" + expr(depth + 1) + " if " + expr(depth + 1) + " else " + expr(depth + 1) + ")";
	return "(" + expr(depth + 1) + ")";
}
function stmt(depth) {
	const r = rnd();
	const ws = () => pick(["", "-"]);
	const sp = () => pick(["", " ", "\n", "\n  ", "\t", "  \n"]);
	if (depth > 2 || r < 0.35) return sp() + "{{" + ws() + " " + expr(0) + " " + ws() + "}}" + sp();
	if (r < 0.45) return sp() + pick(["text", "a b", "{", "}", "%", "#", "-}", "%}\n", "é😀"]) + sp();
	if (r < 0.6) return `{%${ws()} if ${expr(0)} ${ws()}%}${stmt(depth + 1)}{%${ws()} else ${ws()}%}${stmt(depth + 1)}{%${ws()} endif ${ws()}%}` + sp();
	if (r < 0.72) return `{%${ws()} for ${pick(["m", "k", "x"])} in ${pick(["messages", "xs", "d", "range(4)", "d.items()", "xs|reverse", "messages[1:]", "s", "n"])} ${pick(["", "if loop.index > 1", "if x"])} ${ws()}%}${stmt(depth + 1)}${rnd() < 0.2 ? "{% break %}" : ""}${stmt(depth + 1)}{%${ws()} endfor ${ws()}%}` + sp();
	if (r < 0.82) return `{%${ws()} set ${pick(["v", "s", "n", "ns"])} = ${expr(0)} ${ws()}%}` + stmt(depth + 1);
	if (r < 0.88) return `{# c ${pick(["", "-", "x"])} ${ws()}#}` + sp();
	if (r < 0.94) return `{% macro mm(a, b=2) %}${stmt(depth + 1)}{{ a }}{{ b }}{% endmacro %}{{ mm(${expr(0)}) }}`;
	return stmt(depth + 1) + stmt(depth + 1);
}
// token soup for the lexer: tags with and without "-", unicode white space, escapes, numbers
const lexemes = ["{{", "}}", "{%", "%}", "{{-", "-}}", "{%-", "-%}", "{#", "#}", "{#-", "-#}", " ", "  ", "\n", "\t", "\u00a0", "\u2028", "\u3000", "\r\n", "x", "xs", "s", "n", "d", "1", "-1", "- 1", "+2", "1.5", "3.", ".5", "1.5.2", "0", "'a'", "'\\n'", "'\\x41'", "'\\u00e9'", "'\\ud83d\\ude00'", "\"q\\\"\"", "'é😀'", "'{{'", "'}}'", "(", ")", "[", "]", "{", "}", ",", ".", ":", "|", "+", "-", "~", "*", "**", "/", "//", "%", "==", "!=", "<", ">", "<=", ">=", "=", "if", "else", "elif", "endif", "for", "in", "endfor", "set", "endset", "not", "and", "or", "is", "defined", "none", "true", "length", "trim", "tojson", "join", "loop", "index", "text", "é", "😀", "#"];
const frames = ["{{ X }}", "{% set v = X %}[{{ v }}]", "{% if X %}y{% else %}z{% endif %}", "{% for i in X %}{{ i }}{% endfor %}", "T{{ X }}T", "X"];
function soup() {
	let x = "";
	const len = 1 + Math.floor(rnd() * 7);
	for (let k = 0; k < len; k++) x += pick(lexemes) + (rnd() < 0.5 ? " " : "");
	return pick(frames).replace("X", x);
}
const N = Number(process.argv[2] ?? 2000);
const out = [];
for (let i = 0; i < N; i++) {
	let t;
	if (rnd() < 0.3) t = soup();
	else if (rnd() < 0.85) t = Array.from({ length: 1 + Math.floor(rnd() * 4) }, () => stmt(0)).join("");
	else { const s = pick(snippets); t = s.body; const a = Math.floor(rnd() * t.length); t = t.slice(0, a) + stmt(1) + t.slice(a + Math.floor(rnd() * 30)); }
	const vars = msgvars;
	let r;
	try { r = { out: new Template(t).render(JSON.parse(vars)) }; } catch (e) { r = { error: String(e.message ?? e).slice(0, 200) }; }
	out.push(JSON.stringify({ tmpl: t, vars, ...r }));
}
fs.writeFileSync(process.argv[4] ?? "cases.jsonl", out.join("\n") + "\n");
