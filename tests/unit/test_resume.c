/* The --resume journal (common/resume.c): pieces kept only when their bytes match, every other
 * file removed, torn and malformed lines left out, another command's journal refused naming
 * what differs, one run at a time. */
#include "common/common.h"
#include "tests/unit/check.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *ID3 = "{\"inputs\": [\"a size 1 mtime_ns 2 head -\"], \"options\": {\"bits\": 3}, \"tool\": \"t\", \"version\": \"" TQ_VERSION "\"}";
static const char *ID4 = "{\"inputs\": [\"a size 1 mtime_ns 2 head -\"], \"options\": {\"bits\": 4}, \"tool\": \"t\", \"version\": \"" TQ_VERSION "\"}";
static const char *IDIN = "{\"inputs\": [\"a size 9 mtime_ns 2 head -\"], \"options\": {\"bits\": 3}, \"tool\": \"t\", \"version\": \"" TQ_VERSION "\"}";

static char *dir_path(const char *name)
{
    char *d = t_path(name);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s/sub'", d, d);
    CHECK(system(cmd) == 0);
    return d;
}

static void put(const char *dir, const char *name, const char *text)
{
    tq_err err = {0};
    char *p = tq_path_join(dir, name, &err);
    int fd = p ? open(p, O_CREAT | O_WRONLY | O_TRUNC, 0644) : -1;
    CHECK(fd >= 0 && tq_write_full(fd, text, strlen(text), p, &err) == 0);
    if (fd >= 0)
        close(fd);
    free(p);
}

static int there(const char *dir, const char *name)
{
    char *p = tq_path_join(dir, name, NULL);
    int ok = p && tq_exists(p);
    free(p);
    return ok;
}

static void append(const char *dir, const char *text)
{
    char *p = tq_path_join(dir, ".tq-resume", NULL);
    int fd = p ? open(p, O_WRONLY | O_APPEND) : -1;
    CHECK(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    if (fd >= 0)
        close(fd);
    free(p);
}

/* a directory with pieces "one" (extra "x y") and "sub/two" journaled and "stray" not */
static char *journaled(const char *name)
{
    char *d = dir_path(name);
    tq_err err = {0};
    tq_resume *r = NULL;
    CHECK_OK(tq_resume_open(&r, d, ID3, 2, 1, &err));
    put(d, "one", "first piece");
    put(d, "sub/two", "second piece");
    put(d, "stray", "never journaled");
    CHECK_OK(tq_resume_done(r, "one", "x y", &err));
    unsigned char sha[32];
    tq_sha256_buf("second piece", 12, sha);
    CHECK_OK(tq_resume_done_sha(r, "sub/two", 12, sha, NULL, &err));
    tq_resume_close(r);
    return d;
}

static void keeps_matching(void)
{
    char *d = journaled("resume_keep");
    tq_err err = {0};
    tq_resume *r = NULL;
    CHECK_OK(tq_resume_open(&r, d, ID3, 2, 1, &err));
    size_t kept, dropped;
    tq_resume_counts(r, &kept, &dropped);
    CHECK(kept == 2 && dropped == 0);
    uint64_t size = 0;
    const char *x = tq_resume_have(r, "one", &size, NULL);
    CHECK(x && !strcmp(x, "x y") && size == 11);
    x = tq_resume_have(r, "sub/two", NULL, NULL);
    CHECK(x && !*x);
    CHECK(!tq_resume_have(r, "stray", NULL, NULL) && !there(d, "stray") && there(d, "sub"));
    CHECK_OK(tq_resume_finish(r, &err));
    CHECK(!there(d, ".tq-resume"));
    tq_resume_close(r);
}

static void redoes_changed(void)
{
    char *d = journaled("resume_changed");
    put(d, "one", "first pieCe"); /* same size, other bytes */
    char *two = tq_path_join(d, "sub/two", NULL);
    CHECK(two && unlink(two) == 0);
    free(two);
    tq_err err = {0};
    tq_resume *r = NULL;
    CHECK_OK(tq_resume_open(&r, d, ID3, 1, 1, &err));
    size_t kept, dropped;
    tq_resume_counts(r, &kept, &dropped);
    CHECK(kept == 0 && dropped == 2);
    CHECK(!tq_resume_have(r, "one", NULL, NULL) && !there(d, "one"));
    tq_resume_close(r);
    /* the rewritten journal forgot them: a third open drops nothing more */
    CHECK_OK(tq_resume_open(&r, d, ID3, 1, 1, &err));
    tq_resume_counts(r, &kept, &dropped);
    CHECK(kept == 0 && dropped == 0);
    tq_resume_close(r);
}

static void malformed_lines(void)
{
    char *d = journaled("resume_malformed");
    char hex[65];
    unsigned char sha[32];
    tq_sha256_buf("first piece", 11, sha);
    tq_hex(sha, 32, hex);
    char buf[1024];
    /* each of these is left out; "one" and "sub/two" stay kept */
    snprintf(buf, sizeof buf,
             "junk\npiece zz 11 one\npiece %s 11 ../one\npiece %s 11 /one\npiece %s x one\npiece %s 11 .tq-resume\n"
             "piece %s\npiece %s 99999999999999999999999 one\npiece %s 11 stray",
             hex, hex, hex, hex, hex, hex, hex);
    append(d, buf);
    put(d, "stray", "first piece"); /* named only on the torn last line */
    tq_err err = {0};
    tq_resume *r = NULL;
    CHECK_OK(tq_resume_open(&r, d, ID3, 2, 1, &err));
    size_t kept, dropped;
    tq_resume_counts(r, &kept, &dropped);
    CHECKF(kept == 2 && dropped == 0, "kept %zu dropped %zu", kept, dropped);
    CHECK(!there(d, "stray"));
    tq_resume_close(r);
    /* a journal without its identity line (or another file's bytes) is no journal */
    put(d, ".tq-resume", "tq-resume-v1 {\"tool\"");
    CHECK_OK(tq_resume_open(&r, d, ID3, 1, 1, &err));
    tq_resume_counts(r, &kept, &dropped);
    CHECK(kept == 0 && !there(d, "one"));
    tq_resume_close(r);
}

static void other_command(void)
{
    char *d = journaled("resume_other");
    tq_err err = {0};
    tq_resume *r = NULL;
    CHECK(tq_resume_open(&r, d, ID4, 1, 1, &err) != 0 && !r);
    CHECKF(err.code == TQ_EUSAGE && strstr(err.msg, "(--bits was 3 there, 4 here)"), "%s", err.msg);
    memset(&err, 0, sizeof err);
    CHECK(tq_resume_open(&r, d, IDIN, 1, 1, &err) != 0);
    CHECKF(err.code == TQ_EDATA && strstr(err.msg, "the input changed: a size 9"), "%s", err.msg);
    CHECK(there(d, "one") && there(d, "stray")); /* refused: nothing removed */
}

static void one_at_a_time(void)
{
    char *d = journaled("resume_lock");
    tq_err err = {0};
    tq_resume *a = NULL, *b = NULL;
    CHECK_OK(tq_resume_open(&a, d, ID3, 1, 1, &err));
    CHECK(tq_resume_open(&b, d, ID3, 1, 1, &err) != 0 && strstr(err.msg, "another --resume run is writing it"));
    tq_resume_close(a);
    CHECK_OK(tq_resume_open(&b, d, ID3, 1, 1, &err));
    tq_resume_close(b);
}

int main(void)
{
    RUN(keeps_matching);
    RUN(redoes_changed);
    RUN(malformed_lines);
    RUN(other_command);
    RUN(one_at_a_time);
    TEST_MAIN_END();
}
