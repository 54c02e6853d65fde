/* cmd/progress.c — --progress auto|tty|plain|json: the front-ends' one progress sink. The
 * library reports phases through tq_progress (common/progress.c) and never prints; this
 * renders them on stderr: a bar with rate and ETA on a terminal, periodic plain lines (the
 * default under CI=true), or one JSON object per line for pipelines. */
#include "cmd/cli.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

int tq_cli_progress_mode = TQ_CLI_PROGRESS_AUTO;
const tq_opt_choice tq_cli_progress_choices[] = {
    {"auto", TQ_CLI_PROGRESS_AUTO, 0}, {"tty", TQ_CLI_PROGRESS_TTY, 0}, {"plain", TQ_CLI_PROGRESS_PLAIN, 0},
    {"json", TQ_CLI_PROGRESS_JSON, 0}, {NULL, 0, 0},
};

#define PLAIN_EVERY 10.0 /* seconds between plain lines (and before the first) */
#define JSON_EVERY 0.5   /* seconds between JSON lines */
#define TTY_EVERY 0.2

static struct {
    int mode;
    char phase[64];
    double start, last;
} st;

static void fmt_eta(double s, char *buf, size_t cap)
{
    if (s < 0)
        snprintf(buf, cap, "--:--");
    else if (s < 3600)
        snprintf(buf, cap, "%d:%02d", (int)s / 60, (int)s % 60);
    else
        snprintf(buf, cap, "%d:%02d:%02d", (int)s / 3600, (int)s / 60 % 60, (int)s % 60);
}

static void sink(void *ctx, const char *phase, uint64_t done, uint64_t total, int final)
{
    (void)ctx;
    double now = tq_now();
    if (strncmp(st.phase, phase, sizeof st.phase - 1) != 0) { /* a new phase */
        snprintf(st.phase, sizeof st.phase, "%s", phase);
        st.start = now;
        /* plain: the first line after PLAIN_EVERY, not a "0.0% ... ETA --:--" line at the
         * start of every phase; a short phase prints only its "done" line */
        st.last = st.mode == TQ_CLI_PROGRESS_PLAIN ? now : -1e9;
    }
    double every = st.mode == TQ_CLI_PROGRESS_TTY ? TTY_EVERY : st.mode == TQ_CLI_PROGRESS_JSON ? JSON_EVERY : PLAIN_EVERY;
    if (!final && now - st.last < every)
        return;
    if (!final && st.mode == TQ_CLI_PROGRESS_PLAIN && done == 0)
        return; /* nothing done yet after PLAIN_EVERY: the next report says more */
    st.last = now;
    double el = now - st.start;
    double rate = el > 0 ? (double)done / el : 0;
    double eta = total && done >= total ? 0 : total && rate > 0 ? (double)(total - done) / rate : -1;
    double pct = total ? 100.0 * (double)done / (double)total : 0;
    char r_h[32], d_h[32], t_h[32], eta_h[32];
    tq_format_size((uint64_t)rate, r_h, sizeof r_h);
    switch (st.mode) {
    case TQ_CLI_PROGRESS_TTY:
        if (final) {
            fprintf(stderr, "\r\033[K");
            break;
        }
        {
            char bar[21];
            int fill = total ? (int)(20 * done / total) : 0;
            for (int i = 0; i < 20; i++)
                bar[i] = i < fill ? '#' : '.';
            bar[20] = 0;
            fmt_eta(eta, eta_h, sizeof eta_h);
            fprintf(stderr, "\r%s: %s: [%s] %5.1f%% %s/s ETA %s\033[K", tq_prog, phase, bar, pct, r_h, eta_h);
        }
        break;
    case TQ_CLI_PROGRESS_PLAIN:
        tq_format_size(done, d_h, sizeof d_h);
        tq_format_size(total, t_h, sizeof t_h);
        if (final)
            fprintf(stderr, "%s: %s: done, %s in %.1f s (%s/s)\n", tq_prog, phase, d_h, el, r_h);
        else {
            fmt_eta(eta, eta_h, sizeof eta_h);
            fprintf(stderr, "%s: %s: %.1f%% (%s of %s) %s/s ETA %s\n", tq_prog, phase, pct, d_h, t_h, r_h, eta_h);
        }
        break;
    case TQ_CLI_PROGRESS_JSON: {
        /* keys sorted, like every JSON tq writes; eta_s null while unknown */
        char eta_j[32];
        if (eta < 0)
            snprintf(eta_j, sizeof eta_j, "null");
        else
            snprintf(eta_j, sizeof eta_j, "%.3f", eta);
        fprintf(stderr, "{\"bytes_per_s\":%.0f,\"done\":%llu,\"eta_s\":%s,\"final\":%s,\"phase\":\"%s\",\"total\":%llu}\n",
                rate, (unsigned long long)done, eta_j, final ? "true" : "false", phase, (unsigned long long)total);
        break;
    }
    }
    fflush(stderr);
}

void tq_cli_progress_start(int quiet, int json_report)
{
    int m = quiet ? 0 : tq_cli_progress_mode;
    if (m == TQ_CLI_PROGRESS_AUTO) {
        const char *ci = getenv("CI");
        if (json_report) /* a JSON report on stdout: nothing unasked on its terminal */
            m = 0;
        else if (isatty(STDERR_FILENO))
            m = TQ_CLI_PROGRESS_TTY;
        else if (ci && *ci && strcasecmp(ci, "false") && strcmp(ci, "0"))
            m = TQ_CLI_PROGRESS_PLAIN;
        else
            m = 0;
    }
    st.mode = m;
    st.phase[0] = 0;
    tq_progress_set_sink(m ? sink : NULL, NULL);
}
