/* tq-verify: subcommands that inspect and check model files. Argument parsing only; the
 * work is in the library. Add a command: one function and one line in `commands`. */
#include "cmd/cli.h"
#include "formats/formats.h"
#include "verify/verify.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmd_ls(int argc, char **argv)
{
    int json = 0, rd = 0, quiet = 0, keep_names = 0, rc;
    tq_opt opts[] = {
        TQ_OPT_FLAG("json", 'j', &json, "machine-readable listing"),
        TQ_OPT_FLAG("read", 'r', &rd, "also read every tensor's bytes end to end; report bytes/s on stderr"),
        TQ_OPT_FLAG("keep-names", 0, &keep_names, "GGUF input: list GGUF tensor names, not HF/MLX names"),
        TQ_CLI_PROGRESS_OPT,
        TQ_OPT_FLAG("quiet", 'q', &quiet, "no listing (unless --json) and no warnings (with --read: only errors)"),
        TQ_OPT_END,
    };
    tq_cli_spec cli = {
        .command = "ls",
        .usage = "Usage: tq-verify ls [OPTIONS] FILE|DIR\n",
        .about = "List the tensors of a safetensors file or model directory: name, dtype, shape,\n"
                 "file, byte offset and size, one per line (or a JSON document with --json).\n",
        .opts = opts,
        .examples = (const char *const[]){
            "tq-verify ls model   # tensors: name, dtype, shape, file, offset, bytes",
            "tq-verify ls --json model-tq3 > tensors.json",
            NULL},
    };
    if (tq_cli_parse(&cli, argc, argv, &rc))
        return rc;
    if (cli.n_args != 1)
        return tq_cli_usage_error("expected one FILE or DIR");
    if ((rc = tq_cli_hf_models(&cli, 0, 1)) != 0)
        return rc;
    tq_cli_progress_start(quiet, json);
    const char *path = cli.args[0];
    unsigned flags = keep_names ? TQ_MODEL_KEEP_NAMES : 0;
    tq_err err = {0};
    tq_model *m;
    if (tq_model_open_ex(&m, path, flags, &err) != 0)
        return tq_cli_fail(&err);
    const char *const *warn;
    size_t n_warn = tq_gguf_model_warnings(m, &warn);
    for (size_t i = 0; i < n_warn && !quiet; i++)
        fprintf(stderr, "%s: warning: %s\n", tq_prog, tq_cli_esc(warn[i]));
    rc = 0;
    if ((json || !quiet) && tq_model_list(m, stdout, json, &err) != 0) /* --json prints whatever --quiet says */
        rc = tq_cli_fail(&err);
    if (rc == 0 && rd) {
        uint64_t bytes;
        double t0 = tq_now();
        if (tq_model_read_all(m, 8u << 20, &bytes, &err) != 0) {
            rc = tq_cli_fail(&err);
        } else if (!quiet) {
            double dt = tq_now() - t0;
            char hb[32];
            tq_format_size(bytes, hb, sizeof hb);
            fprintf(stderr, "%s: read %llu bytes (%s) in %.3f s: %.1f MiB/s, peak RSS %.1f MiB\n", tq_prog,
                    (unsigned long long)bytes, hb, dt, dt > 0 ? (double)bytes / dt / (1 << 20) : 0.0,
                    (double)tq_peak_rss() / (1 << 20));
        }
    }
    tq_model_close(m);
    return rc;
}

/* ------------------------------------------------------------------ manifest */
static int cmd_manifest(int argc, char **argv)
{
    int json = 0, quiet = 0, threads = tq_default_threads(), rc;
    tq_opt opts[] = {
        TQ_OPT_INT("threads", 't', &threads, 1, 256, "N", "hashing threads (default: the number of CPUs)"),
        TQ_OPT_FLAG("json", 'j', &json, "print a JSON summary"),
        TQ_CLI_PROGRESS_OPT,
        TQ_OPT_FLAG("quiet", 'q', &quiet, "print nothing on success"),
        TQ_OPT_END,
    };
    tq_cli_spec cli = {
        .command = "manifest",
        .usage = "Usage: tq-verify manifest [OPTIONS] DIR\n",
        .implied = "DIR/SHA256SUMS DIR/tq-manifest.json",
        .about = "Hash every file under DIR and write DIR/SHA256SUMS (the format 'sha256sum -c'\n"
                 "checks) and DIR/tq-manifest.json (sizes, SHA-256 of every file, and dtype, shape,\n"
                 "offsets and SHA-256 of every safetensors tensor and split expert block).\n",
        .opts = opts,
        .examples = (const char *const[]){
            "tq-verify manifest model-tq3   # SHA256SUMS and tq-manifest.json beside the files",
            NULL},
    };
    if (tq_cli_parse(&cli, argc, argv, &rc))
        return rc;
    if (cli.n_args != 1)
        return tq_cli_usage_error("expected one DIR");
    const char *dir = cli.args[0];
    tq_verify_progress(1);
    tq_cli_progress_start(quiet, json);
    tq_err err = {0};
    tq_manifest *m;
    double t0 = tq_now();
    if (tq_manifest_update(dir, threads, &m, &err) != 0)
        return tq_cli_fail(&err);
    uint64_t bytes = 0;
    size_t tensors = 0;
    for (size_t i = 0; i < m->n_files; i++) {
        bytes += m->files[i].size;
        tensors += m->files[i].n_ranges;
    }
    double dt = tq_now() - t0;
    rc = 0;
    if (json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "dir", dir);
        cJSON_AddNumberToObject(j, "files", (double)m->n_files);
        cJSON_AddNumberToObject(j, "bytes", (double)bytes);
        cJSON_AddNumberToObject(j, "ranges", (double)tensors);
        cJSON_AddNumberToObject(j, "threads", threads);
        cJSON_AddNumberToObject(j, "elapsed_s", dt);
        rc = tq_cli_print_json(j);
    } else if (!quiet) {
        char hb[32];
        tq_format_size(bytes, hb, sizeof hb);
        printf("%s: %zu files, %s, %zu tensors/blocks hashed; wrote %s and %s\n", tq_cli_esc(dir), m->n_files, hb, tensors,
               TQ_SUMS_NAME, TQ_MANIFEST_NAME);
    }
    tq_manifest_free(m);
    return rc;
}

/* ---------------------------------------------------------- signature output */
static void add_signer_json(cJSON *j, const tq_oms_info *info)
{
    cJSON_AddStringToObject(j, "signature", info->sig_path ? info->sig_path : "");
    cJSON_AddStringToObject(j, "model_name", info->name ? info->name : "");
    cJSON_AddStringToObject(j, "subject_sha256", info->subject);
    cJSON_AddStringToObject(j, "key_type", info->key_type ? info->key_type : "");
    cJSON_AddStringToObject(j, "key_hint", info->key_hint);
}

/* The end of check and verify: the report (JSON, or problem lines and a summary line "PATH:
 * OK (N of N <what> verified, 0 problems[; SIG: a valid signature by the TYPE key HINT])"),
 * the error of a check that could not run, the exit status. info: the signature checked, or
 * NULL; r and info are freed. */
static int report_out(const char *path, int rc, tq_check_report *r, tq_oms_info *info, const tq_err *err, int json,
                      int quiet, const char *what)
{
    int status = rc != 0 || r->n ? 1 : 0;
    if (json) {
        cJSON *j = tq_check_report_json(r);
        cJSON_AddStringToObject(j, "path", path);
        if (rc == 0 && info)
            add_signer_json(j, info);
        if (rc != 0) {
            cJSON_ReplaceItemInObject(j, "ok", cJSON_CreateFalse());
            cJSON_AddStringToObject(j, "error", err->msg);
        }
        tq_cli_print_json(j);
    } else if (!quiet) {
        tq_check_report_print(r, stdout);
        if (rc == 0 && info)
            printf("%s: %s (%zu of %zu %s verified, %zu problem%s; %s: a valid signature by the %s key %.16s)\n", tq_cli_esc(path),
                   r->n ? "FAILED" : "OK", r->files_ok, r->files_listed, what, r->n, r->n == 1 ? "" : "s",
                   tq_cli_esc(info->sig_path ? info->sig_path : "?"), tq_cli_esc(info->key_type ? info->key_type : "?"),
                   tq_cli_esc(info->key_hint));
        else if (rc == 0)
            printf("%s: %s (%zu of %zu %s verified, %zu problem%s)\n", tq_cli_esc(path), r->n ? "FAILED" : "OK", r->files_ok,
                   r->files_listed, what, r->n, r->n == 1 ? "" : "s");
    }
    if (rc != 0 && !json)
        tq_cli_fail(err);
    tq_check_report_free(r);
    tq_oms_info_free(info);
    return status;
}

/* --------------------------------------------------------------------- check */
static int cmd_check(int argc, char **argv)
{
    int json = 0, quiet = 0, threads = tq_default_threads(), rc;
    const char *pubkey = NULL;
    tq_opt opts[] = {
        TQ_OPT_INT("threads", 't', &threads, 1, 256, "N",
                   "hashing threads for a directory (default: the number of CPUs)"),
        TQ_OPT_STR("pubkey", 'p', &pubkey, "PUB.pem",
                   "also check the model.sig signature with this public key and every file against it"),
        TQ_OPT_FLAG("json", 'j', &json, "print a JSON report"),
        TQ_CLI_PROGRESS_OPT,
        TQ_OPT_FLAG("quiet", 'q', &quiet, "print nothing; only the exit status"),
        TQ_OPT_END,
    };
    tq_cli_spec cli = {
        .command = "check",
        .usage = "Usage: tq-verify check [OPTIONS] DIR|BUNDLE\n",
        .about = "Verify a directory against its tq-manifest.json (or SHA256SUMS), or a .tar.zst\n"
                 "bundle in one streaming pass without extracting it. Every problem is printed on\n"
                 "stdout as 'FILE: [TENSOR|BLOCK: ]what is wrong': a differing file names the\n"
                 "tensors or expert blocks (layer, expert) that differ; missing and extra files\n"
                 "and refused bundle entries are listed too. With --pubkey the model.sig signature\n"
                 "(the directory's, or the bundle's) is checked too, and every file against it.\n",
        .epilog = "Exit status: 0 all good, 1 any problem or unreadable input, 2 bad usage.\n",
        .opts = opts,
        .examples = (const char *const[]){
            "tq-verify check model-tq3   # every file and tensor against the manifest",
            "tq-verify check model-split   # a split against its split.json",
            NULL},
    };
    if (tq_cli_parse(&cli, argc, argv, &rc))
        return rc;
    if (cli.n_args != 1)
        return tq_cli_usage_error("expected one DIR or BUNDLE");
    const char *path = cli.args[0];
    tq_verify_progress(1);
    tq_cli_progress_start(quiet, json);
    tq_err err = {0};
    tq_check_report r;
    tq_oms_info info;
    rc = tq_is_dir(path) ? tq_check_dir_signed(path, threads, pubkey, &r, &info, &err)
                         : tq_check_bundle_signed(path, pubkey, &r, &info, &err);
    return report_out(path, rc, &r, pubkey ? &info : NULL, &err, json, quiet, "files");
}

/* ---------------------------------------------------------------------- sign */
static int cmd_sign(int argc, char **argv)
{
    int json = 0, quiet = 0, rc;
    const char *key = NULL;
    tq_cli_strs ignore = {0};
    tq_oms_opts o = {.threads = tq_default_threads()};
    int no_git = 0, no_index = 0;
    tq_opt opts[] = {
        TQ_OPT_STR("key", 'k', &key, "KEY.pem", "the private key (PEM, unencrypted): ECDSA P-256, P-384, P-521 or Ed25519"),
        TQ_OPT_OUT_FILE("out", 'o', &o.sig, "FILE",
                   "the signature to write (default: DIR/model.sig; an existing non-empty one needs --force)"),
        TQ_OPT_FLAG("force", 0, &o.force, "replace an existing non-empty signature FILE (atomically)"),
        TQ_OPT_STRS("ignore-paths", 0, &ignore, "PATH",
                    "leave PATH (a file or directory, relative to the current directory) out of the signature; "
                    "repeatable"),
        TQ_OPT_FLAG("no-ignore-git-paths", 0, &no_git, "sign .git, .gitattributes, .github and .gitignore too"),
        TQ_OPT_FLAG("no-ignore-manifests", 0, &no_index, "sign SHA256SUMS and tq-manifest.json too"),
        TQ_OPT_FLAG("allow-symlinks", 0, &o.allow_symlinks, "follow symbolic links to files (default: refuse them)"),
        TQ_OPT_INT("threads", 't', &o.threads, 1, 256, "N", "hashing threads (default: the number of CPUs)"),
        TQ_OPT_FLAG("json", 'j', &json, "print a JSON summary"),
        TQ_CLI_PROGRESS_OPT,
        TQ_OPT_FLAG("quiet", 'q', &quiet, "print nothing on success"),
        TQ_OPT_END,
    };
    tq_cli_spec cli = {
        .command = "sign",
        .usage = "Usage: tq-verify sign [OPTIONS] DIR|FILE --key KEY.pem\n",
        .implied = "DIR/model.sig",
        .about = "Hash every file of a model directory (or one model file) and write an OpenSSF Model\n"
                 "Signing signature, as the model_signing tool's key method does: an in-toto\n"
                 "statement listing every file with its SHA-256, in a DSSE envelope signed with\n"
                 "KEY.pem, in a Sigstore bundle. Left out: the signature itself, .git,\n"
                 ".gitattributes, .github, .gitignore, SHA256SUMS and tq-manifest.json.\n",
        .opts = opts,
        .examples = (const char *const[]){
            "tq-verify sign model-tq3 --key key.pem   # key.pem: openssl ecparam -genkey, see tq-verify(1)",
            NULL},
    };
    if (tq_cli_parse(&cli, argc, argv, &rc))
        return rc;
    if (cli.n_args != 1 || !key)
        return tq_cli_usage_error("expected DIR (or FILE) and --key KEY.pem");
    o.ignore = ignore.v;
    o.n_ignore = ignore.n;
    o.keep_git = no_git;
    o.keep_index = no_index;
    tq_verify_progress(1);
    tq_cli_progress_start(quiet, json);
    tq_err err = {0};
    tq_oms_info info;
    double t0 = tq_now();
    if (tq_oms_sign(cli.args[0], key, &o, &info, &err) != 0)
        return tq_cli_fail(&err);
    rc = 0;
    if (json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "model", cli.args[0]);
        add_signer_json(j, &info);
        cJSON_AddNumberToObject(j, "files", (double)info.files);
        cJSON_AddNumberToObject(j, "bytes", (double)info.bytes);
        cJSON_AddNumberToObject(j, "elapsed_s", tq_now() - t0);
        rc = tq_cli_print_json(j);
    } else if (!quiet) {
        char hb[32];
        tq_format_size(info.bytes, hb, sizeof hb);
        printf("%s: signed %zu file%s (%s) with the %s key %.16s; wrote %s\n", tq_cli_esc(cli.args[0]), info.files,
               info.files == 1 ? "" : "s", hb, tq_cli_esc(info.key_type), tq_cli_esc(info.key_hint),
               tq_cli_esc(info.sig_path));
    }
    tq_oms_info_free(&info);
    return rc;
}

/* -------------------------------------------------------------------- verify */
static int cmd_verify(int argc, char **argv)
{
    int json = 0, quiet = 0, rc;
    const char *pubkey = NULL;
    tq_cli_strs ignore = {0};
    tq_oms_opts o = {.threads = tq_default_threads()};
    tq_opt opts[] = {
        TQ_OPT_STR("pubkey", 'p', &pubkey, "PUB.pem", "the signer's public key (PEM)"),
        TQ_OPT_STR("sig", 's', &o.sig, "FILE", "the signature (default: DIR/model.sig)"),
        TQ_OPT_STRS("ignore-paths", 0, &ignore, "PATH",
                    "also leave PATH (relative to the current directory) out of the check; repeatable"),
        TQ_OPT_INT("threads", 't', &o.threads, 1, 256, "N", "hashing threads (default: the number of CPUs)"),
        TQ_OPT_FLAG("json", 'j', &json, "print a JSON report"),
        TQ_CLI_PROGRESS_OPT,
        TQ_OPT_FLAG("quiet", 'q', &quiet, "print nothing; only the exit status"),
        TQ_OPT_END,
    };
    tq_cli_spec cli = {
        .command = "verify",
        .usage = "Usage: tq-verify verify [OPTIONS] DIR|FILE --pubkey PUB.pem\n",
        .about = "Check an OpenSSF Model Signing signature (the model_signing tool's key method, or\n"
                 "tq-verify sign) with PUB.pem, then hash every file of the model and compare it with\n"
                 "the signed list. Every file that differs, is missing or is not signed is printed\n"
                 "on stdout as 'FILE: what is wrong'; paths the signature leaves out are skipped.\n",
        .epilog = "Exit status: 0 valid and every file matches, 1 anything else, 2 bad usage.\n",
        .opts = opts,
        .examples = (const char *const[]){
            "tq-verify verify model-tq3 --pubkey key.pub   # key.pub: openssl pkey -pubout, see tq-verify(1)",
            NULL},
    };
    if (tq_cli_parse(&cli, argc, argv, &rc))
        return rc;
    if (cli.n_args != 1 || !pubkey)
        return tq_cli_usage_error("expected DIR (or FILE) and --pubkey PUB.pem");
    o.ignore = ignore.v;
    o.n_ignore = ignore.n;
    const char *path = cli.args[0];
    tq_verify_progress(1);
    tq_cli_progress_start(quiet, json);
    tq_err err = {0};
    tq_check_report r;
    tq_oms_info info;
    rc = tq_oms_verify(path, pubkey, &o, &r, &info, &err);
    return report_out(path, rc, &r, &info, &err, json, quiet, "signed files");
}

/* ------------------------------------------------------------------- compare */
static int cmd_compare(int argc, char **argv)
{
    int json = 0, quiet = 0, rc;
    tq_opt opts[] = {
        TQ_OPT_FLAG("json", 'j', &json, "print a JSON report"),
        TQ_OPT_FLAG("quiet", 'q', &quiet, "print nothing; only the exit status"),
        TQ_OPT_END,
    };
    tq_cli_spec cli = {
        .command = "compare",
        .usage = "Usage: tq-verify compare [OPTIONS] A B\n",
        .about = "Compare two models tensor by tensor, bit for bit, whatever their sharding: model\n"
                 "directories or .safetensors files. Prints the first differing byte of every\n"
                 "differing tensor, and tensors only in A or only in B.\n",
        .epilog = "Exit status: 0 identical, 1 any difference or unreadable input, 2 bad usage.\n",
        .opts = opts,
        .examples = (const char *const[]){
            "tq-verify compare model-tq3 model-joined   # tensor by tensor, bit for bit",
            NULL},
    };
    if (tq_cli_parse(&cli, argc, argv, &rc))
        return rc;
    if (cli.n_args != 2)
        return tq_cli_usage_error("expected A and B");
    if ((rc = tq_cli_hf_models(&cli, 0, 2)) != 0)
        return rc;
    tq_err err = {0};
    tq_cmp_report r;
    if (tq_compare_models(cli.args[0], cli.args[1], &r, &err) != 0) {
        tq_cmp_report_free(&r);
        return tq_cli_fail(&err);
    }
    int status = r.n ? 1 : 0;
    if (json) {
        tq_cli_print_json(tq_cmp_report_json(&r));
    } else if (!quiet) {
        for (size_t i = 0; i < r.n; i++)
            printf("tensor '%s': %s\n", tq_cli_esc(r.v[i].tensor), tq_cli_esc(r.v[i].detail));
        printf("%s: %zu of %zu tensors identical%s\n", r.n ? "DIFFERENT" : "IDENTICAL", r.tensors_equal,
               r.tensors_compared, r.n ? "" : " (bit-exact)");
    }
    tq_cmp_report_free(&r);
    return status;
}

/* -------------------------------------------------------------------- golden */
static cJSON *ids_json(const int32_t *v, size_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; v && i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
    return a;
}

static int cmd_golden(int argc, char **argv)
{
    int json = 0, quiet = 0, rc;
    const char *gpath = NULL;
    tq_golden_opts o = {0};
    tq_cli_ids prompt = {0};
    const char *prompt_text_old = NULL;
    tq_opt opts[] = {
        TQ_OPT_OUT_FILE("golden", 'g', &gpath, "FILE", "the golden file (tq_golden_v1, see tq-formats(5))"),
        TQ_OPT_FLAG("update", 'u', &o.update, "rewrite FILE atomically with this run's tokens and hash (creates it)"),
        TQ_OPT_IDS("tokens", 0, &prompt, "IDS",
                   "with --update: comma-separated prompt token ids (default: keep), as tq-run --tokens"),
        TQ_OPT_STR("prompt", 'p', &o.prompt_text, "TEXT",
                   "with --update: the prompt as text, encoded with MODEL's tokenizer.json (no special tokens "
                   "added), as tq-run --prompt"),
        TQ_OPT_STR("prompt-text", 0, &prompt_text_old, "TEXT", "deprecated spelling of --prompt"),
        TQ_OPT_INT("max-tokens", 'm', &o.max_tokens, 1, 65536, "N",
                   "with --update: tokens to generate (default: keep, or 8)"),
        TQ_OPT_INT("threads", 't', &o.threads, 1, 256, "N", "runtime threads (results do not depend on it)"),
        TQ_OPT_FLAG("json", 'j', &json, "print a JSON report"),
        TQ_OPT_FLAG("quiet", 'q', &quiet, "print nothing; only the exit status"),
        TQ_OPT_END,
    };
    tq_cli_spec cli = {
        .command = "golden",
        .usage = "Usage: tq-verify golden [OPTIONS] MODEL --golden FILE.json\n",
        .about = "Run the reference runtime's validation decode (greedy, the prompt token ids stored\n"
                 "in FILE.json) on MODEL (plain, quantized or split) and compare the generated\n"
                 "tokens and the SHA-256 of all logits with FILE.json. When MODEL has a tokenizer.json,\n"
                 "the prompt's and the generated tokens' text are recorded too, and the text compared.\n",
        .epilog = "Exit status: 0 match (or updated), 1 mismatch or error, 2 bad usage.\n",
        .opts = opts,
        .examples = (const char *const[]){
            "tq-verify golden model-tq3 --golden decode.json --update --tokens 1,2,3   # record a decode",
            "tq-verify golden model-split --golden decode.json   # the split decodes the same",
            NULL},
    };
    if (tq_cli_parse(&cli, argc, argv, &rc))
        return rc;
    if (cli.n_args != 1 || !gpath)
        return tq_cli_usage_error("expected MODEL and --golden FILE.json");
    if (prompt_text_old) {
        fprintf(stderr, "%s: golden: --prompt-text is deprecated: use --prompt TEXT (and --tokens IDS for "
                "token ids), as tq-run does\n", tq_prog);
        if (o.prompt_text)
            return tq_cli_usage_error("--prompt and --prompt-text go one at a time");
        o.prompt_text = prompt_text_old;
    } else if (o.prompt_text && o.prompt_text[0] && strspn(o.prompt_text, "0123456789, ") == strlen(o.prompt_text)) {
        /* before, --prompt took token ids: refuse them rather than golden the digits as text */
        return tq_cli_usage_error("--prompt '%s': --prompt takes text now (as tq-run's); token ids go with "
                                  "--tokens", o.prompt_text);
    }
    if ((prompt.v || o.prompt_text || o.max_tokens) && !o.update)
        return tq_cli_usage_error("--tokens, --prompt and --max-tokens only go with --update");
    if (prompt.v && o.prompt_text)
        return tq_cli_usage_error("--tokens and --prompt go one at a time");
    o.prompt = prompt.v;
    o.n_prompt = prompt.n;
    tq_err err = {0};
    tq_golden_result r;
    rc = tq_golden_run(cli.args[0], gpath, &o, &r, &err);
    if (rc != 0)
        return tq_cli_fail(&err);
    int status = r.match || r.updated ? 0 : 1;
    if (json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddBoolToObject(j, "match", r.match);
        cJSON_AddBoolToObject(j, "updated", r.updated);
        cJSON_AddItemToObject(j, "tokens", ids_json(r.tokens, r.n_tokens));
        cJSON_AddStringToObject(j, "logits_sha256", r.logits_sha256);
        if (r.expected) {
            cJSON_AddItemToObject(j, "expected_tokens", ids_json(r.expected, r.n_tokens));
            cJSON_AddStringToObject(j, "expected_logits_sha256", r.expected_sha256);
        }
        cJSON_AddNumberToObject(j, "first_token_diff", (double)r.first_token_diff);
        if (r.text)
            cJSON_AddStringToObject(j, "text", r.text);
        if (r.expected_text)
            cJSON_AddStringToObject(j, "expected_text", r.expected_text);
        cJSON_AddBoolToObject(j, "text_differs", r.text_differs);
        tq_cli_print_json(j);
    } else if (!quiet) {
        if (r.expected && !r.match) {
            if (r.first_token_diff >= 0 && (size_t)r.first_token_diff < r.n_tokens)
                printf("%s: token %ld differs: got %d, expected %d\n", tq_cli_esc(gpath), r.first_token_diff,
                       r.tokens[r.first_token_diff], r.expected[r.first_token_diff]);
            else if (r.first_token_diff >= 0)
                printf("%s: token count differs\n", tq_cli_esc(gpath));
            if (strcmp(r.logits_sha256, r.expected_sha256))
                printf("%s: logits sha256 %s, expected %s\n", tq_cli_esc(gpath), r.logits_sha256, r.expected_sha256);
            if (r.text_differs)
                printf("%s: the tokens decode to other text than recorded (the tokenizer changed)\n", tq_cli_esc(gpath));
        }
        printf("%s: %s (%zu tokens, logits sha256 %s)\n", tq_cli_esc(gpath),
               r.updated ? "updated" : r.match ? "OK" : "MISMATCH", r.n_tokens, r.logits_sha256);
    }
    tq_golden_result_free(&r);
    return status;
}

/* ---------------------------------------------------------------------- pack */
static int cmd_pack(int argc, char **argv)
{
    int quiet = 0, threads = tq_default_threads(), level = 3, force = 0, rc;
    const char *out = NULL;
    tq_opt opts[] = {
        TQ_OPT_OUT_FILE("output", 'o', &out, "FILE",
                   "the bundle (written atomically; an existing non-empty FILE needs --force, one that is "
                   "not a regular file is refused), or - for standard output"),
        TQ_OPT_FLAG("force", 0, &force, "replace an existing non-empty FILE"),
        TQ_OPT_INT("threads", 't', &threads, 1, 256, "N", "hashing threads (default: the number of CPUs)"),
        TQ_OPT_INT("level", 'l', &level, 1, 19, "L", "zstd level 1..19 (default 3)"),
        TQ_CLI_PROGRESS_OPT,
        TQ_OPT_FLAG("quiet", 'q', &quiet, "print nothing on success"),
        TQ_OPT_END,
    };
    tq_cli_spec cli = {
        .command = "pack",
        .usage = "Usage: tq-verify pack [OPTIONS] DIR -o NAME.tar.zst\n",
        .about = "Write a deterministic bundle of DIR: tq-manifest.json and SHA256SUMS first\n"
                 "(generated fresh; when DIR has them they must match its content, or pack\n"
                 "refuses), then DIR's signature model.sig if it has one, then every file in path\n"
                 "order, pax tar with fixed mtime 0, uid/gid 0, mode 0644, compressed with zstd.\n"
                 "The same directory always gives the same bytes.\n",
        .opts = opts,
        .examples = (const char *const[]){
            "tq-verify pack model-tq3 -o model-tq3.tar.zst   # deterministic bundle with its manifest",
            NULL},
    };
    if (tq_cli_parse(&cli, argc, argv, &rc))
        return rc;
    if (cli.n_args != 1 || !out)
        return tq_cli_usage_error("expected DIR and -o NAME.tar.zst");
    if (!strcmp(out, "-") && tq_cli_stdout_binary_check("-o -"))
        return 2;
    tq_verify_progress(1);
    tq_cli_progress_start(quiet, 0);
    tq_err err = {0};
    if (strcmp(out, "-"))
        tq_cli_partials_note(out);
    if ((strcmp(out, "-") && tq_out_file_check(out, force, &err) != 0) ||
        tq_bundle_pack(cli.args[0], out, threads, level, force, &err) != 0)
        return tq_cli_fail(&err);
    if (!quiet && strcmp(out, "-")) { /* the bundle itself went to standard output */
        unsigned char d[32];
        char hex[65];
        uint64_t size;
        if (tq_sha256_file(out, d, &size, &err) != 0)
            return tq_cli_fail(&err);
        tq_hex(d, 32, hex);
        printf("%s  %s (%llu bytes)\n", hex, tq_cli_esc(out), (unsigned long long)size);
    }
    return 0;
}

/* -------------------------------------------------------------------- unpack */
static int cmd_unpack(int argc, char **argv)
{
    int json = 0, quiet = 0, force = 0, rc;
    const char *out = NULL;
    tq_opt opts[] = {
        TQ_OPT_OUT_DIR("output", 'o', &out, "DIR",
                   "the directory to write (an existing non-empty DIR needs --force)"),
        TQ_OPT_FLAG("force", 0, &force, "replace an existing non-empty DIR, whole, once the bundle has been verified"),
        TQ_OPT_FLAG("json", 'j', &json, "print a JSON report"),
        TQ_CLI_PROGRESS_OPT,
        TQ_OPT_FLAG("quiet", 'q', &quiet, "print nothing on success"),
        TQ_OPT_END,
    };
    tq_cli_spec cli = {
        .command = "unpack",
        .usage = "Usage: tq-verify unpack [OPTIONS] BUNDLE -o DIR\n",
        .about = "Verify and extract a bundle into DIR (absent or empty; a non-empty one needs --force),\n"
                 "through DIR.partial-XXXXXX renamed at the end: a bundle with any problem (hash mismatch,\n"
                 "missing or extra file, unsafe path, link, device, duplicate) leaves nothing.\n",
        .opts = opts,
        .examples = (const char *const[]){
            "tq-verify unpack model-tq3.tar.zst -o downloaded   # checked, then extracted",
            NULL},
    };
    if (tq_cli_parse(&cli, argc, argv, &rc))
        return rc;
    if (cli.n_args != 1 || !out)
        return tq_cli_usage_error("expected BUNDLE and -o DIR");
    tq_cli_progress_start(quiet, json);
    tq_err err = {0};
    tq_check_report r;
    tq_cli_partials_note(out);
    rc = tq_bundle_unpack(cli.args[0], out, force, &r, &err);
    if (json) {
        cJSON *j = tq_check_report_json(&r);
        if (rc != 0) {
            cJSON_ReplaceItemInObject(j, "ok", cJSON_CreateFalse());
            cJSON_AddStringToObject(j, "error", err.msg);
        }
        tq_cli_print_json(j);
    } else {
        if (!quiet || rc != 0)
            tq_check_report_print(&r, stdout);
        if (rc == 0 && !quiet)
            printf("%s: %zu files verified and unpacked\n", tq_cli_esc(out), r.files_ok);
    }
    tq_check_report_free(&r);
    if (rc != 0)
        return json ? tq_exit_code(&err) : tq_cli_fail(&err);
    return 0;
}

/* ------------------------------------------------------------------- quality */
static int cmd_quality(int argc, char **argv)
{
    int json = 0, quiet = 0, force = 0, rc;
    const char *plot = NULL;
    tq_quality_opts o = {0};
    tq_opt opts[] = {
        TQ_OPT_STR("eval", 'e', &o.eval_path, "FILE",
                   "also evaluate both models on this text (encoded with REF's tokenizer.json): perplexity, "
                   "KL(REF||TEST) and top-1 agreement per scored token"),
        TQ_OPT_INT("window", 0, &o.window, 2, 1 << 24, "N", "--eval window in tokens (default 512)"),
        TQ_OPT_FLAG("noise", 0, &o.noise,
                    "--eval: also evaluate REF plus iid Gaussian noise of TEST's error energy in each tensor "
                    "(the baseline of unbiased error: perplexity, KL, top-1 agreement)"),
        TQ_OPT_INT("noise-seed", 0, &o.noise_seed, 0, INT32_MAX, "N", "--noise: seed of the draws (default 0)"),
        TQ_OPT_INT("stride", 0, &o.stride, 1, 1 << 24, "N",
                   "--eval: a window starts every N tokens, scoring its last N (default window/2)"),
        TQ_OPT_OUT_FILE("plot", 'p', &plot, "FILE.svg",
                        "write an SVG chart of the relative MSE per layer, in total and per tensor class (an "
                        "existing non-empty FILE needs --force)"),
        TQ_OPT_FLAG("force", 0, &force, "replace an existing non-empty --plot FILE"),
        TQ_OPT_INT("threads", 't', &o.threads, 1, 256, "N", "dequantization and runtime threads (results do not depend on it)"),
        TQ_OPT_FLAG("json", 'j', &json, "print a JSON report"),
        TQ_OPT_FLAG("quiet", 'q', &quiet, "print nothing; only the exit status"),
        TQ_OPT_END,
    };
    tq_cli_spec cli = {
        .command = "quality",
        .usage = "Usage: tq-verify quality [OPTIONS] REF TEST [--eval FILE] [--plot FILE.svg]\n",
        .about = "Measure how far TEST (usually a quantized model) is from REF (its source): every float\n"
                 "tensor of REF against TEST's, TEST's quantized modules dequantized first, as relative\n"
                 "MSE sum((w'-w)^2)/sum(w^2) per tensor, per class and per layer; with --eval, both\n"
                 "models' perplexity on the same tokens, KL(REF||TEST) and top-1 agreement.\n",
        .epilog = "Exit status: 0 measured, 1 the models do not match (a tensor missing or of another shape,\n"
                  "another vocabulary) or an error, 2 bad usage.\n",
        .opts = opts,
        .examples = (const char *const[]){
            "tq-verify quality model model-tq3   # relative MSE per tensor, class and layer",
            NULL},
    };
    if (tq_cli_parse(&cli, argc, argv, &rc))
        return rc;
    if (cli.n_args != 2)
        return tq_cli_usage_error("expected REF and TEST");
    if ((rc = tq_cli_hf_models(&cli, 0, 2)) != 0)
        return rc;
    if (o.stride && !o.window && o.stride >= 512)
        return tq_cli_usage_error("--stride must be below the window (512)");
    if (o.stride && o.window && o.stride >= o.window)
        return tq_cli_usage_error("--stride must be below --window");
    if ((o.window || o.stride) && !o.eval_path)
        return tq_cli_usage_error("--window and --stride go with --eval");
    if (o.noise && !o.eval_path)
        return tq_cli_usage_error("--noise goes with --eval");
    if (tq_cli_given(&cli, "noise-seed") && !o.noise)
        return tq_cli_usage_error("--noise-seed goes with --noise");
    tq_err err = {0};
    for (int i = 0; plot && i < 2; i++)
        if (tq_check_out_in(plot, cli.args[i], &err) != 0 ||
            (o.eval_path && tq_check_out_in(plot, o.eval_path, &err) != 0))
            return tq_cli_fail(&err);
    /* the chart's file as it is now is what the chart may replace at the end */
    tq_afile pf = {.fd = -1};
    if (plot && tq_afile_check(&pf, plot, force ? TQ_AFILE_REPLACE : 0, &err) != 0)
        return tq_cli_fail(&err);
    tq_quality_report r;
    if (tq_quality_run(cli.args[0], cli.args[1], &o, &r, &err) != 0) {
        tq_afile_abort(&pf);
        tq_quality_report_free(&r);
        return tq_cli_fail(&err);
    }
    rc = 0;
    if (plot) {
        size_t len;
        char *svg = tq_quality_svg(&r, &len, &err);
        if (!svg || tq_afile_create(&pf, &err) != 0)
            rc = tq_cli_fail(&err);
        else if (tq_write_full(pf.fd, svg, len, pf.tmp_path, &err) != 0 || tq_afile_commit(&pf, &err) != 0)
            rc = tq_cli_fail(&err);
        tq_afile_abort(&pf);
        free(svg);
    }
    if (rc == 0 && json) {
        rc = tq_cli_print_json(tq_quality_report_json(&r));
    } else if (rc == 0 && !quiet) {
        for (size_t i = 0; i < r.n; i++)
            if (r.t[i].err2 > 0)
                printf("%-12.6g %s\n", r.t[i].rel_mse, tq_cli_esc(r.t[i].name));
        printf("tensors: %zu compared, %zu differ (%llu weights): relative MSE %.6g\n", r.n, r.n_differ,
               (unsigned long long)r.params_differ, r.rel_mse);
        for (size_t c = 0; c < r.n_classes; c++)
            printf("  class %-24s %.6g\n", tq_cli_esc(r.classes[c]), r.class_rel_mse[c]);
        for (uint64_t l = 0; l < r.n_layers; l++)
            printf("  layer %-24llu %.6g\n", (unsigned long long)l, r.layer_rel_mse[l]);
        if (r.has_eval) {
            const tq_quality_eval *q = &r.ev;
            printf("eval: %llu tokens, %llu scored (window %llu, stride %llu)\n", (unsigned long long)q->tokens,
                   (unsigned long long)q->scored, (unsigned long long)q->window, (unsigned long long)q->stride);
            printf("perplexity: REF %.4f, TEST %.4f (%+.2f%%)\n", q->ref_ppl, q->test_ppl,
                   q->ref_ppl > 0 ? 100 * (q->test_ppl / q->ref_ppl - 1) : 0);
            printf("next-token top-1: REF %.4f, TEST %.4f\n", q->ref_top1, q->test_top1);
            printf("KL(REF||TEST): mean %.6g nats/token, max %.6g\n", q->mean_kl, q->max_kl);
            printf("top-1 agreement: %llu/%llu (%.4f)\n", (unsigned long long)q->top1_agree,
                   (unsigned long long)q->steps, q->top1_rate);
            printf("standard errors over the scored tokens: KL %.3g, TEST-REF mean NLL %.3g\n", q->kl_stderr,
                   q->nll_diff_stderr);
            if (q->has_noise)
                printf("noise baseline (seed %llu): perplexity %.4f (%+.2f%%), KL mean %.6g (standard error %.3g), "
                       "top-1 agreement %.4f\n",
                       (unsigned long long)q->noise_seed, q->noise_ppl,
                       q->ref_ppl > 0 ? 100 * (q->noise_ppl / q->ref_ppl - 1) : 0, q->noise_mean_kl,
                       q->noise_kl_stderr, q->noise_top1_rate);
        }
    }
    tq_quality_report_free(&r);
    return rc;
}

/* ------------------------------------------------------------------ provenance */
static int cmd_provenance(int argc, char **argv)
{
    int json = 0, rc;
    tq_opt opts[] = {
        TQ_OPT_FLAG("json", 'j', &json, "print the document itself (sorted keys)"),
        TQ_OPT_END,
    };
    tq_cli_spec cli = {
        .command = "provenance",
        .usage = "Usage: tq-verify provenance [--json] DIR|FILE\n",
        .about = "Show where an output came from: the tq version and the command line that made it,\n"
                 "and the identity of its source (file names, sizes, SHA-256 of each header, the\n"
                 "HuggingFace repo and revision), from DIR/tq-provenance.json, or from the header of\n"
                 "a tq-rowlayout row FILE (__metadata__ tq_provenance).\n",
        .opts = opts,
        .examples = (const char *const[]){
            "tq-verify provenance model-tq3   # which tool, command and source made it",
            NULL},
    };
    if (tq_cli_parse(&cli, argc, argv, &rc))
        return rc;
    if (cli.n_args != 1)
        return tq_cli_usage_error("expected one DIR or FILE");
    tq_err err = {0};
    cJSON *j;
    if (tq_provenance_read(cli.args[0], &j, &err) != 0)
        return tq_cli_fail(&err);
    if (json)
        return tq_cli_print_json(j);
    const cJSON *c, *src = cJSON_GetObjectItemCaseSensitive(j, "source");
    printf("made by: %s %s\ncommand:", tq_cli_esc(cJSON_GetObjectItemCaseSensitive(j, "tool")->valuestring),
           tq_cli_esc(cJSON_GetObjectItemCaseSensitive(j, "version")->valuestring));
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(j, "command"))
    {
        printf(" %s", tq_cli_esc(c->valuestring));
    }
    printf("\n");
    const cJSON *hf = cJSON_GetObjectItemCaseSensitive(src, "huggingface");
    if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(hf, "repo")) &&
        cJSON_IsString(cJSON_GetObjectItemCaseSensitive(hf, "revision")))
        printf("huggingface: %s at revision %s\n", tq_cli_esc(cJSON_GetObjectItemCaseSensitive(hf, "repo")->valuestring),
               tq_cli_esc(cJSON_GetObjectItemCaseSensitive(hf, "revision")->valuestring));
    if (!src)
        printf("source: none (generated)\n");
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(src, "files"))
    {
        uint64_t size = 0;
        const cJSON *h = cJSON_GetObjectItemCaseSensitive(c, "header_sha256");
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(c, "first_mib_sha256");
        tq_json_u64(cJSON_GetObjectItemCaseSensitive(c, "size"), &size);
        printf("source: %s, %llu bytes", tq_cli_esc(cJSON_GetObjectItemCaseSensitive(c, "name")->valuestring),
               (unsigned long long)size);
        if (cJSON_IsString(h))
            printf(", header SHA-256 %s", tq_cli_esc(h->valuestring));
        else if (cJSON_IsString(f))
            printf(", first MiB SHA-256 %s", tq_cli_esc(f->valuestring));
        printf("\n");
    }
    cJSON_Delete(j);
    return 0;
}

static const struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} commands[] = {
    {"ls", cmd_ls, "list the tensors of a safetensors file or model directory"},
    {"manifest", cmd_manifest, "write SHA256SUMS and tq-manifest.json for a directory"},
    {"check", cmd_check, "verify a directory or bundle against its manifest"},
    {"compare", cmd_compare, "compare two models tensor by tensor, bit for bit"},
    {"golden", cmd_golden, "compare a validation decode with a golden file"},
    {"quality", cmd_quality, "measure a quantized model against its reference"},
    {"sign", cmd_sign, "write an OpenSSF Model Signing signature (model.sig)"},
    {"verify", cmd_verify, "check a model against its model.sig with a public key"},
    {"pack", cmd_pack, "write a deterministic .tar.zst bundle of a directory"},
    {"unpack", cmd_unpack, "verify and extract a bundle"},
    {"provenance", cmd_provenance, "show where an output directory or row file came from"},
};

int main(int argc, char **argv)
{
    tq_cli_init("tq-verify");
    if (argc >= 2 && argv[1][0] == '-') {
        /* before the COMMAND only --help, -h, --version and --list-commands */
        char about[2048];
        size_t len = (size_t)snprintf(about, sizeof about, "Inspect and check model files.\n\nCommands:\n");
        for (size_t i = 0; i < sizeof commands / sizeof *commands && len < sizeof about; i++)
            len += (size_t)snprintf(about + len, sizeof about - len, "  %-10s %s\n", commands[i].name,
                                    commands[i].summary);
        int list = 0;
        tq_opt top[] = {
            TQ_OPT_FLAG("list-commands", 0, &list, "print the command names, one a line, and exit"),
            TQ_OPT_END,
        };
        tq_cli_spec cli = {
            .usage = "Usage: tq-verify COMMAND [OPTIONS] ...\n",
            .about = about,
            .epilog = "'tq-verify COMMAND --help' describes a command's options.\n"
                      "Exit status: 0 ok, 1 bad data or I/O error, 2 bad usage.\n",
            .opts = top,
            .examples = (const char *const[]){"tq-verify ls model", "tq-verify check model-tq3.tar.zst", NULL},
        };
        char *head[] = {argv[0], argv[1], NULL};
        int rc;
        if (tq_cli_parse(&cli, 2, head, &rc))
            return rc;
        if (list) { /* the one list tests and scripts take the commands from */
            if (argc > 2)
                return tq_cli_usage_error("--list-commands takes no arguments");
            for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
                printf("%s\n", commands[i].name);
            return 0;
        }
    }
    if (argc < 2)
        return tq_cli_usage_error("missing COMMAND");
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    const char *names[sizeof commands / sizeof *commands];
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        names[i] = commands[i].name;
    char hint[256];
    tq_cli_nearest(argv[1], strlen(argv[1]), names, sizeof names / sizeof *names, "", hint, sizeof hint);
    return tq_cli_usage_error("unknown command '%s'%s", argv[1], hint);
}
