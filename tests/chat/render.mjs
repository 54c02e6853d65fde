// tests/chat/render.mjs: renders chat templates with @huggingface/jinja, the oracle of tq's chat_template.c.
//
//   node render.mjs templates OUTDIR NAME=DIR... -- CASE.json...
//     For each template directory DIR (tokenizer_config.json's chat_template, else
//     chat_template.jinja) and each case (a JSON list of messages, or an object of variables
//     holding "messages"), writes OUTDIR/NAME.CASE.txt (the rendering) or OUTDIR/NAME.CASE.err
//     (the error message), with the variables tq_chat_render_dir passes: add_generation_prompt
//     true unless given, and the config's bos/eos/unk/pad tokens unless given.
//   node render.mjs snippets SNIPPETS.txt OUT.jsonl
//     Each template of SNIPPETS.txt (separated by lines "#### NAME") rendered with the variables
//     of its "#### NAME {json}" line; one JSON line per template: {"name", "out"} or {"name", "error"}.
//
// strftime_now's date is SOURCE_DATE_EPOCH (run with TZ=UTC), month names in English, as tq-run
// does with SOURCE_DATE_EPOCH set.
import { Template } from "@huggingface/jinja";
import fs from "node:fs";
import path from "node:path";

const epoch = Number(process.env.SOURCE_DATE_EPOCH ?? "1700000000") * 1000;
const RealDate = Date;
globalThis.Date = class extends RealDate {
	constructor(...a) {
		super(...(a.length ? a : [epoch]));
	}
	static now() {
		return epoch;
	}
};
const RealDTF = Intl.DateTimeFormat;
Intl.DateTimeFormat = function (locale, opts) {
	return new RealDTF(locale ?? "en-US", { timeZone: "UTC", ...opts });
};

function render(tmpl, vars) {
	try {
		return { out: new Template(tmpl).render(vars) };
	} catch (e) {
		return { error: String(e && e.message ? e.message : e) };
	}
}

function tokenText(v) {
	if (typeof v === "string") return v;
	if (v && typeof v === "object" && typeof v.content === "string") return v.content;
	return undefined;
}

const mode = process.argv[2];
if (mode === "templates") {
	const outdir = process.argv[3];
	const rest = process.argv.slice(4);
	const sep = rest.indexOf("--");
	const dirs = rest.slice(0, sep).map((s) => s.split("="));
	const cases = rest.slice(sep + 1);
	fs.mkdirSync(outdir, { recursive: true });
	for (const [name, dir] of dirs) {
		const cfg = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8"));
		let tmpl = cfg.chat_template;
		if (Array.isArray(tmpl)) tmpl = tmpl.find((t) => t.name === "default")?.template;
		if (typeof tmpl !== "string") tmpl = fs.readFileSync(path.join(dir, "chat_template.jinja"), "utf8");
		for (const c of cases) {
			const j = JSON.parse(fs.readFileSync(c, "utf8"));
			const vars = Array.isArray(j) ? { messages: j } : { ...j };
			if (!("add_generation_prompt" in vars)) vars.add_generation_prompt = true;
			for (const k of ["bos_token", "eos_token", "unk_token", "pad_token"]) {
				const t = tokenText(cfg[k]);
				if (t !== undefined && !(k in vars)) vars[k] = t;
			}
			const r = render(tmpl, vars);
			const base = path.join(outdir, `${name}.${path.basename(c, ".json")}`);
			if ("out" in r) fs.writeFileSync(base + ".txt", r.out);
			else fs.writeFileSync(base + ".err", r.error + "\n");
		}
	}
} else if (mode === "snippets") {
	const text = fs.readFileSync(process.argv[3], "utf8");
	const parts = text.split(/^#### /m).slice(1);
	const lines = [];
	for (const p of parts) {
		const nl = p.indexOf("\n");
		const head = p.slice(0, nl);
		const sp = head.indexOf(" ");
		const name = sp < 0 ? head : head.slice(0, sp);
		const vars = sp < 0 ? {} : JSON.parse(head.slice(sp + 1));
		const r = render(p.slice(nl + 1), vars);
		lines.push(JSON.stringify({ name, ...("out" in r ? { out: r.out } : { error: true }) }));
	}
	fs.writeFileSync(process.argv[4], lines.join("\n") + "\n");
} else {
	console.error("usage: render.mjs templates OUTDIR NAME=DIR... -- CASE.json... | snippets FILE OUT.jsonl");
	process.exit(2);
}
