/* The commit primitive (tq_publish, tq_afile, tq_adir), the output-vs-input path check and
 * the input identity watch, each case with its outcome asserted; every publishing case runs
 * twice: with the kernel's flagged renames and with the portable fallbacks. */
#include "common/common.h"
#include "tests/unit/check.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static int fallback; /* this round runs with TQ_RENAME_FALLBACK=1 */

static void put(const char *path, const char *text)
{
    tq_err err = {0};
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    CHECK(fd >= 0 && tq_write_full(fd, text, strlen(text), path, &err) == 0);
    if (fd >= 0)
        close(fd);
}

/* the whole file equals text */
static int holds(const char *path, const char *text)
{
    char *buf = NULL;
    size_t n = 0;
    tq_err err = {0};
    int ok = tq_read_small_file(path, 1 << 20, &buf, &n, &err) == 0 && n == strlen(text) && !memcmp(buf, text, n);
    free(buf);
    return ok;
}


/* an open tq_afile for fin holding text, not yet committed */
static void afile_with(tq_afile *f, const char *fin, int flags, const char *text)
{
    tq_err err = {0};
    CHECK_OK(tq_afile_open(f, fin, flags, &err));
    CHECK_OK(tq_write_full(f->fd, text, strlen(text), f->tmp_path, &err));
}

static char *fresh_dir(const char *name)
{
    char *p = t_path(name);
    tq_rm_tree(p);
    mkdir(p, 0755);
    return p;
}

/* A file output: published, refused when the name appeared meanwhile (the new output is kept
 * and named, the other one untouched), replaced when asked. */
static void publish_file(void)
{
    tq_err err = {0};
    char *dir = fresh_dir("pf");
    char *fin = tq_path_join(dir, "out.bin", &err), *tmp = tq_path_join(dir, "out.bin.partial-1", &err);
    put(tmp, "new");
    CHECK_OK(tq_publish(tmp, fin, 0, &err));
    CHECK(holds(fin, "new") && !tq_exists(tmp));
    put(tmp, "second");
    CHECK(tq_publish(tmp, fin, 0, &err) != 0 && err.code == TQ_EEXIST);
    CHECKF(strstr(err.msg, "appeared while this output was being written") && strstr(err.msg, tmp), "%s", err.msg);
    CHECK(holds(fin, "new") && holds(tmp, "second"));
    CHECK_OK(tq_publish(tmp, fin, TQ_PUBLISH_REPLACE, &err));
    CHECK(holds(fin, "second") && !tq_exists(tmp));
    CHECK(t_count_prefixed(dir, "out.bin.") == 0);
    free(fin);
    free(tmp);
}

/* A directory output: a non-empty directory that appeared is never replaced; with REPLACE the
 * two are exchanged and the old one removed, nothing left beside. */
static void publish_dir(void)
{
    tq_err err = {0};
    char *dir = fresh_dir("pd");
    char *fin = tq_path_join(dir, "out", &err), *tmp = tq_path_join(dir, "out.partial-1", &err);
    char *a = tq_path_join(tmp, "a", &err), *fa = tq_path_join(fin, "a", &err), *theirs = tq_path_join(fin, "theirs", &err);
    mkdir(tmp, 0755);
    put(a, "one");
    CHECK_OK(tq_publish(tmp, fin, 0, &err));
    CHECK(holds(fa, "one") && !tq_exists(tmp));
    /* someone else's directory appears with a file in it */
    tq_rm_tree(fin);
    mkdir(fin, 0755);
    put(theirs, "keep me");
    mkdir(tmp, 0755);
    put(a, "two");
    CHECK(tq_publish(tmp, fin, 0, &err) != 0 && err.code == TQ_EEXIST && strstr(err.msg, tmp));
    CHECK(holds(theirs, "keep me") && !tq_exists(fa) && holds(a, "two"));
    /* asked to replace: exchanged, the old tree removed */
    CHECK_OK(tq_publish(tmp, fin, TQ_PUBLISH_REPLACE, &err));
    CHECK(holds(fa, "two") && !tq_exists(theirs) && !tq_exists(tmp));
    CHECK(t_count_prefixed(dir, "out.") == 0);
    /* a file where a directory goes is not replaced even when asked */
    tq_rm_tree(fin);
    put(fin, "a file");
    mkdir(tmp, 0755);
    CHECK(tq_publish(tmp, fin, TQ_PUBLISH_REPLACE, &err) != 0 && err.code == TQ_EEXIST);
    CHECK(holds(fin, "a file") && tq_is_dir(tmp));
    free(fin);
    free(tmp);
    free(a);
    free(fa);
    free(theirs);
}

/* tq_afile, the one rule of output files: a file created between open and commit survives
 * (the partial is kept, complete, and named); an empty file there at open gives way, unless it
 * got bytes meanwhile; with REPLACE the file there at open is replaced atomically, and only
 * that one: a file renamed into its place meanwhile survives. */
static void afile_appearing(void)
{
    tq_err err = {0};
    char *dir = fresh_dir("af");
    char *fin = tq_path_join(dir, "o.bin", &err);
    char *other = tq_path_join(dir, "other.bin", &err);
    tq_afile f;
    afile_with(&f, fin, 0, "mine");
    put(fin, "theirs");
    char *tmp = strdup(f.tmp_path);
    CHECK(tq_afile_commit(&f, &err) != 0 && err.code == TQ_EEXIST && strstr(err.msg, tmp) &&
          strstr(err.msg, "appeared"));
    CHECK(holds(fin, "theirs") && holds(tmp, "mine") && f.tmp_path == NULL && f.fd < 0);
    unlink(tmp);
    free(tmp);
    /* without REPLACE a non-empty file is refused at open, nothing made */
    CHECK(tq_afile_open(&f, fin, 0, &err) != 0 && err.code == TQ_EEXIST && strstr(err.msg, "--force"));
    CHECK(holds(fin, "theirs") && t_count_prefixed(dir, "o.bin.") == 0);
    afile_with(&f, fin, TQ_AFILE_REPLACE, "replaced");
    CHECK_OK(tq_afile_commit(&f, &err));
    CHECK(holds(fin, "replaced") && t_count_prefixed(dir, "o.bin.") == 0);
    /* REPLACE, but another file took FINAL's place meanwhile: it is left as it is */
    afile_with(&f, fin, TQ_AFILE_REPLACE, "new");
    put(other, "swapped in");
    CHECK(rename(other, fin) == 0);
    tmp = strdup(f.tmp_path);
    CHECK(tq_afile_commit(&f, &err) != 0 && err.code == TQ_EEXIST && strstr(err.msg, tmp));
    CHECK(holds(fin, "swapped in") && holds(tmp, "new"));
    unlink(tmp);
    free(tmp);
    /* an empty file gives way; one that got bytes meanwhile does not */
    put(fin, "");
    afile_with(&f, fin, 0, "over empty");
    CHECK_OK(tq_afile_commit(&f, &err));
    CHECK(holds(fin, "over empty"));
    put(fin, "");
    afile_with(&f, fin, 0, "late");
    FILE *fp = fopen(fin, "a");
    if (fp) {
        fputs("written meanwhile", fp);
        fclose(fp);
    }
    tmp = strdup(f.tmp_path);
    CHECK(tq_afile_commit(&f, &err) != 0 && err.code == TQ_EEXIST && holds(fin, "written meanwhile"));
    unlink(tmp);
    free(tmp);
    /* keep: closed, left in place, path returned */
    unlink(fin);
    afile_with(&f, fin, 0, "k");
    char *kept = tq_afile_keep(&f);
    CHECK(kept && holds(kept, "k") && !tq_exists(fin));
    if (kept)
        unlink(kept);
    free(kept);
    free(fin);
    free(other);
}

/* tq_adir without REPLACE: an empty directory given as the output gives way; one that
 * appeared meanwhile, or got a file meanwhile, is left as it is and the partial is kept. */
static void adir_appearing(void)
{
    tq_err err = {0};
    char *dir = fresh_dir("ad");
    char *fin = tq_path_join(dir, "o", &err), *fx = tq_path_join(fin, "x", &err), *fy = tq_path_join(fin, "y", &err);
    tq_adir d;
    /* empty at open: replaced */
    mkdir(fin, 0755);
    CHECK_OK(tq_adir_open(&d, fin, 0, &err));
    char *px = tq_path_join(d.tmp_path, "x", &err);
    put(px, "x");
    free(px);
    CHECK_OK(tq_adir_commit(&d, &err));
    CHECK(holds(fx, "x") && t_count_prefixed(dir, "o.") == 0);
    /* empty at open, then someone writes into it: refused, both kept */
    tq_rm_tree(fin);
    mkdir(fin, 0755);
    CHECK_OK(tq_adir_open(&d, fin, 0, &err));
    char *tmp = strdup(d.tmp_path);
    put(fy, "theirs");
    CHECK(tq_adir_commit(&d, &err) != 0 && err.code == TQ_EEXIST && strstr(err.msg, tmp));
    CHECK(holds(fy, "theirs") && tq_is_dir(tmp) && d.tmp_path == NULL);
    tq_rm_tree(tmp);
    free(tmp);
    /* absent at open, a non-empty directory appears: refused */
    tq_rm_tree(fin);
    CHECK_OK(tq_adir_open(&d, fin, 0, &err));
    tmp = strdup(d.tmp_path);
    mkdir(fin, 0755);
    put(fy, "theirs");
    CHECK(tq_adir_commit(&d, &err) != 0 && err.code == TQ_EEXIST);
    CHECK(holds(fy, "theirs") && tq_is_dir(tmp));
    tq_rm_tree(tmp);
    free(tmp);
    /* absent at open, an empty directory appears: refused by the kernel's no-replace rename;
     * the fallback rename(2) may replace an empty directory (nothing is lost either way) */
    tq_rm_tree(fin);
    CHECK_OK(tq_adir_open(&d, fin, 0, &err));
    tmp = strdup(d.tmp_path);
    mkdir(fin, 0755);
    int rc = tq_adir_commit(&d, &err);
    if (!fallback)
        CHECK(rc != 0 && err.code == TQ_EEXIST && tq_is_dir(tmp));
    tq_rm_tree(tmp);
    free(tmp);
    /* REPLACE: the non-empty directory is swapped out and removed */
    tq_rm_tree(fin);
    mkdir(fin, 0755);
    put(fy, "old");
    CHECK(tq_adir_open(&d, fin, 0, &err) != 0 && err.code == TQ_EEXIST); /* not without REPLACE */
    CHECK_OK(tq_adir_open(&d, fin, TQ_ADIR_REPLACE, &err));
    px = tq_path_join(d.tmp_path, "x", &err);
    put(px, "new");
    free(px);
    CHECK_OK(tq_adir_commit(&d, &err));
    CHECK(holds(fx, "new") && !tq_exists(fy) && t_count_prefixed(dir, "o.") == 0);
    /* REPLACE replaces the directory seen at open, not one that took its place meanwhile */
    char *other = tq_path_join(dir, "other", &err), *ox = tq_path_join(other, "x", &err);
    CHECK_OK(tq_adir_open(&d, fin, TQ_ADIR_REPLACE, &err));
    tmp = strdup(d.tmp_path);
    mkdir(other, 0755);
    put(ox, "someone else's");
    CHECK(rename(fin, t_path("ad/o-moved")) == 0 && rename(other, fin) == 0);
    CHECK(tq_adir_commit(&d, &err) != 0 && err.code == TQ_EEXIST && strstr(err.msg, tmp));
    CHECK(holds(fx, "someone else's") && tq_is_dir(tmp) && t_count_prefixed(dir, "o.old-") == 0);
    tq_rm_tree(tmp);
    free(tmp);
    /* ... nor one that appeared where there was none */
    tq_rm_tree(fin);
    CHECK_OK(tq_adir_open(&d, fin, TQ_ADIR_REPLACE, &err));
    tmp = strdup(d.tmp_path);
    mkdir(fin, 0755);
    put(fy, "theirs");
    CHECK(tq_adir_commit(&d, &err) != 0 && err.code == TQ_EEXIST && holds(fy, "theirs") && tq_is_dir(tmp));
    tq_rm_tree(tmp);
    free(tmp);
    free(other);
    free(ox);
    free(fin);
    free(fx);
    free(fy);
}

static void out_in_paths(void)
{
    tq_err err = {0};
    char *dir = fresh_dir("oi");
    char *m = tq_path_join(dir, "m", &err), *m2 = tq_path_join(dir, "m2", &err);
    char *f = tq_path_join(m, "w.safetensors", &err), *hl = tq_path_join(dir, "hard", &err);
    char *sl = tq_path_join(dir, "link", &err);
    mkdir(m, 0755);
    put(f, "w");
    CHECK(link(f, hl) == 0 && symlink("m", sl) == 0);
    char buf[1024];
    struct {
        const char *out, *in;
        const char *want; /* NULL: no conflict */
    } cases[] = {
        {m2, m, NULL},                 /* a sibling sharing a name prefix */
        {"new-out", m, NULL},
        {m, m, "is the input"},
        {hl, f, "same device and inode"},
        {f, m, "inside the input directory"},
        {"", NULL, NULL},
    };
    snprintf(buf, sizeof buf, "%s/../m/sub/new/x.f32", m); /* does not exist yet */
    cases[5].out = buf;
    cases[5].in = m;
    cases[5].want = "inside the input directory";
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        err.msg[0] = 0;
        int rc = tq_check_out_in(cases[i].out, cases[i].in, &err);
        if (!cases[i].want)
            CHECKF(rc == 0, "%s vs %s: %s", cases[i].out, cases[i].in, err.msg);
        else
            CHECKF(rc != 0 && err.code == TQ_EUSAGE && strstr(err.msg, cases[i].want) && strstr(err.msg, cases[i].in),
                   "%s vs %s: %s", cases[i].out, cases[i].in, err.msg);
    }
    /* through a symbolic link to the input directory, and the output holding the input */
    char *via = tq_path_join(sl, "x", &err);
    CHECK(tq_check_out_in(via, m, &err) != 0 && strstr(err.msg, "inside the input directory"));
    CHECK(tq_check_out_in(dir, f, &err) != 0 && strstr(err.msg, "would hold the input"));
    CHECK(tq_check_out_in(dir, m, &err) != 0 && strstr(err.msg, "would hold the input"));
    char *c = tq_path_canonical("a/./b/../c//", &err), cwd[4096];
    CHECK(c && getcwd(cwd, sizeof cwd) && !strncmp(c, cwd, strlen(cwd)) && !strcmp(c + strlen(cwd), "/a/c"));
    free(c);
    free(via);
    free(m);
    free(m2);
    free(f);
    free(hl);
    free(sl);
}

static void sources_watch(void)
{
    tq_err err = {0};
    char *dir = fresh_dir("sw");
    char *a = tq_path_join(dir, "a.bin", &err), *b = tq_path_join(dir, "b.bin", &err);
    char *sub = tq_path_join(dir, "sub", &err), *c = tq_path_join(sub, "c.bin", &err);
    char *tmp = t_path("sw-repl.bin");
    put(a, "aaaa");
    put(b, "bbbb");
    mkdir(sub, 0755);
    put(c, "cccc");
    tq_sources s = {0};
    CHECK_OK(tq_sources_add(&s, dir, &err));
    CHECK(s.n == 5);
    CHECK_OK(tq_sources_check(&s, &err));
    /* the same size, other bytes, the times put back: the head hash and ctime see it */
    struct stat st;
    CHECK(stat(c, &st) == 0);
    put(c, "CCCC");
    struct timespec ts[2] = {st.st_atim, st.st_mtim};
    utimensat(AT_FDCWD, c, ts, 0);
    CHECK(tq_sources_check(&s, &err) != 0 && err.code == TQ_EDATA && strstr(err.msg, "c.bin: changed") &&
          strstr(err.msg, "first 65536 bytes differ"));
    tq_sources_free(&s);
    /* replaced by rename: a new inode */
    CHECK_OK(tq_sources_add(&s, a, &err));
    put(tmp, "aaaa");
    CHECK(rename(tmp, a) == 0);
    CHECK(tq_sources_check(&s, &err) != 0 && strstr(err.msg, "a.bin: changed") && strstr(err.msg, "replaced"));
    tq_sources_free(&s);
    /* a file added to a watched directory, one removed */
    CHECK_OK(tq_sources_add(&s, dir, &err));
    put(tmp, "new");
    CHECK(rename(tmp, t_path("sw/sub/new.bin")) == 0);
    CHECK(tq_sources_check(&s, &err) != 0 && strstr(err.msg, "sub: changed") && strstr(err.msg, "entry was added"));
    tq_sources_free(&s);
    CHECK_OK(tq_sources_add(&s, dir, &err));
    unlink(b);
    CHECK(tq_sources_check(&s, &err) != 0 && strstr(err.msg, "b.bin: vanished"));
    tq_sources_free(&s);
    CHECK(tq_sources_add(&s, b, &err) != 0 && strstr(err.msg, "b.bin: cannot open"));
    tq_sources_free(&s);
    free(a);
    free(b);
    free(sub);
    free(c);
}

/* A watched directory whose times changed: its entries are compared, leaving out the
 * outputs given as own (their final names and any NAME.partial-XXXXXX of them); anything else
 * added is a change. The times are set by hand so that a coarse clock cannot hide the change. */
static void touch_dir(const char *d, long sec)
{
    struct timespec ts[2] = {{sec, 0}, {sec, 0}};
    utimensat(AT_FDCWD, d, ts, 0);
}

static void sources_own(void)
{
    tq_err err = {0};
    char *dir = fresh_dir("so");
    char *a = tq_path_join(dir, "a.bin", &err), *fin = tq_path_join(dir, "out.json", &err);
    char *other = tq_path_join(dir, "out.json.partial-zzzzzz", &err), *x = tq_path_join(dir, "x.bin", &err);
    put(a, "aaaa");
    put(fin, "earlier output");
    tq_sources s = {0};
    CHECK_OK(tq_sources_add(&s, dir, &err));
    tq_afile f;
    CHECK_OK(tq_afile_open(&f, fin, TQ_AFILE_REPLACE, &err));
    put(other, "another writer's partial");
    put(fin, "rewritten by someone"); /* an output is no input */
    touch_dir(dir, 1000);
    CHECK_OK(tq_sources_check_afile(&s, &f, &err));
    const char *own[1] = {fin};
    CHECK_OK(tq_sources_check_own(&s, own, 1, &err));
    CHECK(tq_sources_check(&s, &err) != 0); /* without own: out.json and the directory changed */
    put(x, "foreign");
    touch_dir(dir, 2000);
    char *tmp = strdup(f.tmp_path);
    CHECK(tq_sources_check_afile(&s, &f, &err) != 0 && strstr(err.msg, "so: changed") &&
          strstr(err.msg, "entry was added") && strstr(err.msg, tmp) && f.tmp_path == NULL);
    CHECK(tq_exists(tmp));
    unlink(tmp);
    free(tmp);
    /* an input file changed is still a change */
    unlink(x);
    touch_dir(dir, 3000);
    CHECK_OK(tq_sources_check_own(&s, own, 1, &err));
    put(a, "AAAAA");
    CHECK(tq_sources_check_own(&s, own, 1, &err) != 0 && strstr(err.msg, "a.bin: changed"));
    tq_sources_free(&s);
    free(a);
    free(fin);
    free(other);
    free(x);
}

int main(void)
{
    for (fallback = 0; fallback < 2; fallback++) {
        if (fallback)
            setenv("TQ_RENAME_FALLBACK", "1", 1);
        RUN(publish_file);
        RUN(publish_dir);
        RUN(afile_appearing);
        RUN(adir_appearing);
    }
    unsetenv("TQ_RENAME_FALLBACK");
    RUN(out_in_paths);
    RUN(sources_watch);
    RUN(sources_own);
    TEST_MAIN_END();
}
