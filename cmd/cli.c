/* cmd/cli.c — error printing, --version and JSON output shared by the tq front-ends. */
#include "cmd/cli.h"
#include "formats/formats.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *tq_prog = "tq";
const char *tq_cli_command;

static sigset_t stop_signals;
static atomic_int interrupted;

/* SIGINT, SIGTERM and SIGHUP are blocked in every thread and taken here: the partial
 * outputs still open are removed, one line says so, and the exit status is 128 + the
 * signal (130 for SIGINT, 143 for SIGTERM), as a shell reports a process killed by it. */
static void *stop_thread(void *arg)
{
    (void)arg;
    int sig;
    if (sigwait(&stop_signals, &sig) != 0)
        return NULL;
    atomic_store(&interrupted, 1);
    size_t n = tq_partials_remove_all();
    const char *name = sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP";
    const char *kept = tq_partials_kept(); /* --resume: the finished pieces stay */
    if (kept)
        fprintf(stderr, "%s: interrupted by %s; finished pieces are kept in %s (rerun with --resume to continue)\n",
                tq_prog, name, tq_cli_esc(kept));
    else
        fprintf(stderr, "%s: interrupted by %s; %s\n", tq_prog, name,
                n ? "the partial output was removed" : "nothing was left behind");
    fflush(stderr);
    _exit(128 + sig);
}

void tq_cli_init(const char *prog)
{
    tq_prog = prog;
    /* a signal ignored by whoever started us (nohup; a non-interactive shell's background
     * job and SIGINT) stays ignored */
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    sigemptyset(&stop_signals);
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) {
        struct sigaction sa;
        if (sigaction(sigs[i], NULL, &sa) == 0 && sa.sa_handler != SIG_IGN)
            sigaddset(&stop_signals, sigs[i]);
    }
    sigset_t old;
    pthread_t t;
    /* before any other thread starts, so that every one inherits the mask */
    if (pthread_sigmask(SIG_BLOCK, &stop_signals, &old) == 0) {
        if (pthread_create(&t, NULL, stop_thread, NULL) == 0) {
            pthread_detach(t);
            tq_partials_stop_signals(&stop_signals);
        } else
            pthread_sigmask(SIG_SETMASK, &old, NULL); /* no thread: the default actions */
    }
    /* A file-size limit (ulimit -f) must surface as EFBIG from write(), named in an error
     * message with the partial output removed, not as a silent kill. */
    signal(SIGXFSZ, SIG_IGN);
}

int tq_cli_fail(const tq_err *e)
{
    /* an error caused by the interruption's cleanup (a partial directory removed under a
     * writer) is not reported: the stop thread prints its line and exits */
    while (atomic_load(&interrupted))
        pause();
    fprintf(stderr, "%s: ", tq_prog);
    tq_fput_escaped(stderr, e->msg); /* the names in it come from files and arguments */
    fputc('\n', stderr);
    return tq_exit_code(e);
}

const char *tq_cli_esc(const char *s)
{
    static char *ring[8];
    static unsigned next;
    char **slot = &ring[next++ % 8];
    tq_sb b = {0};
    tq_sb_escaped(&b, s ? s : "");
    free(*slot);
    *slot = tq_sb_finish(&b, NULL);
    return *slot ? *slot : "(a name: out of memory escaping it)";
}

int tq_cli_usage_error(const char *fmt, ...)
{
    va_list ap;
    const char *cmd = tq_cli_command;
    fprintf(stderr, "%s: %s%s", tq_prog, cmd ? cmd : "", cmd ? ": " : "");
    va_start(ap, fmt);
    char *msg = tq_vasprintf(NULL, fmt, ap);
    va_end(ap);
    tq_fput_escaped(stderr, msg ? msg : "out of memory"); /* arguments quoted in it may hold anything */
    free(msg);
    fprintf(stderr, "\nTry '%s%s%s --help' for more information.\n", tq_prog, cmd ? " " : "", cmd ? cmd : "");
    return 2;
}

int tq_cli_stdout_binary_check(const char *opt)
{
    if (!isatty(STDOUT_FILENO))
        return 0;
    return tq_cli_usage_error("%s: standard output is a terminal; refusing to write binary data there "
                              "(redirect it to a file or a pipe)", opt);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void tq_cli_partials_note(const char *out)
{
    /* OUT's directory and name, trailing slashes aside */
    size_t n = strlen(out);
    while (n > 1 && out[n - 1] == '/')
        n--;
    size_t b = n;
    while (b > 0 && out[b - 1] != '/')
        b--;
    char *dir = b ? strndup(out, b) : strdup("./"), *base = strndup(out + b, n - b);
    DIR *d = dir && base && *base ? opendir(dir) : NULL;
    char **found = NULL;
    size_t nf = 0, cap = 0;
    struct dirent *de;
    size_t bl = base ? strlen(base) : 0;
    while (d && (de = readdir(d))) {
        /* NAME.partial-XXXXXX as tq_afile_* and tq_adir_* make them (mkstemp, mkdtemp);
         * NAME.partial-resume has its own note */
        const char *t = de->d_name + bl;
        if (strncmp(de->d_name, base, bl) != 0 || strncmp(t, ".partial-", 9) != 0 || strlen(t + 9) != 6 ||
            !strcmp(t + 9, "resume"))
            continue;
        if (nf == cap) {
            char **g = realloc(found, (cap = cap ? 2 * cap : 4) * sizeof *g);
            if (!g)
                break;
            found = g;
        }
        if (!(found[nf] = malloc(b + strlen(de->d_name) + 1)))
            break;
        memcpy(found[nf], out, b);
        strcpy(found[nf] + b, de->d_name);
        nf++;
    }
    if (d)
        closedir(d);
    if (nf) {
        qsort(found, nf, sizeof *found, cmp_str);
        uint64_t total = 0;
        fprintf(stderr, "%s: note: %s left by %s killed before %s end (or still running), not removed:", tq_prog,
                nf == 1 ? "a partial output" : "partial outputs", nf == 1 ? "a run" : "runs", nf == 1 ? "its" : "their");
        for (size_t i = 0; i < nf; i++) {
            char h[32];
            uint64_t sz = tq_tree_bytes(found[i]);
            total += sz;
            tq_format_size(sz, h, sizeof h);
            fprintf(stderr, "%s %s (%s)", i ? "," : "", tq_cli_esc(found[i]), h);
        }
        if (nf > 1) {
            char h[32];
            tq_format_size(total, h, sizeof h);
            fprintf(stderr, "; %s in all", h);
        }
        fputc('\n', stderr);
    }
    for (size_t i = 0; i < nf; i++)
        free(found[i]);
    free(found);
    free(dir);
    free(base);
}

void tq_cli_resume_note(const char *out, int resume)
{
    tq_cli_partials_note(out);
    char *p = resume ? NULL : tq_sibling_path(out, TQ_RESUME_SUFFIX, NULL);
    if (p && tq_exists(p))
        fprintf(stderr,
                "%s: note: %s holds an interrupted --resume run; it is left alone (add --resume to continue it, "
                "or remove it)\n",
                tq_prog, p);
    free(p);
}

void tq_cli_resume_kept(const char *out, int resume)
{
    char *p = resume ? tq_sibling_path(out, TQ_RESUME_SUFFIX, NULL) : NULL;
    if (p && tq_exists(p))
        fprintf(stderr, "%s: finished pieces are kept in %s (rerun with --resume to continue)\n", tq_prog, tq_cli_esc(p));
    free(p);
}

void tq_cli_version(void)
{
    printf("%s (tq) %s\n", tq_prog, TQ_VERSION);
}

int tq_cli_print_json(cJSON *j)
{
    tq_err err = {0};
    char *s = j ? tq_json_print(j, &err) : NULL;
    if (!j)
        tq_fail(&err, TQ_ENOMEM, "out of memory building the JSON report");
    cJSON_Delete(j);
    if (!s)
        return tq_cli_fail(&err);
    fputs(s, stdout);
    free(s);
    return 0;
}

int tq_cli_hf_models(tq_cli_spec *s, int first, int count)
{
    static char *kept[8]; /* reachable until the exit */
    static int n_kept;
    for (int i = first; i < first + count && i < s->n_args; i++) {
        tq_err err = {0};
        char *r = tq_hf_resolve(s->args[i], &err);
        if (!r)
            return tq_cli_fail(&err);
        if (!strcmp(r, s->args[i]) || n_kept == (int)(sizeof kept / sizeof *kept)) {
            free(r);
            continue;
        }
        s->args[i] = kept[n_kept++] = r;
    }
    return 0;
}
