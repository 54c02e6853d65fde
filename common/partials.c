/* common/partials.c — the partial outputs (NAME.partial-XXXXXX) this process has open, so
 * that an interrupted tool can remove them before it exits (cmd/cli.c, SIGINT/SIGTERM).
 * tq_afile_* and tq_adir_* register theirs from open until commit, abort or keep. */
#include "common/common.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char **paths;
static size_t n_paths, cap_paths;
static char *kept;
static sigset_t stop_set;
static int have_stop_set;

void tq_partials_stop_signals(const sigset_t *set)
{
    stop_set = *set;
    have_stop_set = 1;
}

/* A stop signal already sent but not yet taken by the stop thread: the caller waits for the
 * exit that thread makes (the signal is blocked here, so pause() returns only by the exit). */
static void wait_if_stopping(void)
{
    sigset_t pending;
    if (!have_stop_set || sigpending(&pending) != 0)
        return;
    /* POSIX has no bound on signal numbers (NSIG is an extension): the signals a stop set
     * can hold are the named ones that end a process by default (cmd/cli.c uses three). */
    static const int named[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM, SIGPIPE, SIGXCPU, SIGXFSZ};
    for (size_t i = 0; i < sizeof named / sizeof *named; i++)
        if (sigismember(&stop_set, named[i]) == 1 && sigismember(&pending, named[i]) == 1)
            for (;;)
                pause();
}

void tq_partials_add(const char *path)
{
    pthread_mutex_lock(&mu);
    if (n_paths == cap_paths) {
        size_t cap = cap_paths ? 2 * cap_paths : 16;
        char **p = realloc(paths, cap * sizeof *p);
        if (p) {
            paths = p;
            cap_paths = cap;
        }
    }
    char *copy = n_paths < cap_paths ? strdup(path) : NULL;
    if (copy) /* without memory the partial is still removed on every path but a signal */
        paths[n_paths++] = copy;
    pthread_mutex_unlock(&mu);
}

void tq_partials_forget(const char *path)
{
    wait_if_stopping();
    pthread_mutex_lock(&mu);
    for (size_t i = n_paths; i-- > 0;)
        if (!strcmp(paths[i], path)) {
            free(paths[i]);
            paths[i] = paths[--n_paths];
            break;
        }
    pthread_mutex_unlock(&mu);
}

size_t tq_partials_remove_all(void)
{
    pthread_mutex_lock(&mu); /* kept: the process exits after this, nothing registers again */
    size_t removed = 0;
    for (size_t i = 0; i < n_paths; i++) {
        struct stat st;
        /* workers may still be creating files in a partial directory: try again until it
         * is gone (for at most about a second) */
        for (int tries = 0; tries < 100 && lstat(paths[i], &st) == 0; tries++) {
            if (S_ISDIR(st.st_mode))
                tq_rm_tree(paths[i]);
            else
                unlink(paths[i]);
            if (lstat(paths[i], &st) != 0) {
                removed++;
                break;
            }
            nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
        }
    }
    return removed;
}

void tq_partials_keep(const char *path)
{
    char *copy = path ? strdup(path) : NULL;
    pthread_mutex_lock(&mu);
    free(kept);
    kept = copy;
    pthread_mutex_unlock(&mu);
}

const char *tq_partials_kept(void)
{
    return kept; /* read by the stop thread after tq_partials_remove_all, under the held lock */
}
