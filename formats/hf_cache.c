/* formats/hf_cache.c — a HuggingFace cache entry as a model directory, offline: a repo id
 * ORG/NAME looked up in the hub cache ($HF_HUB_CACHE, else $HF_HOME/hub, else
 * ~/.cache/huggingface/hub), or a cache directory models--ORG--NAME, resolved to
 * snapshots/REV with REV from refs/main. Nothing is downloaded. */
#include "formats/formats.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* ORG/NAME with the characters HuggingFace allows in repo ids */
static int is_repo_id(const char *s)
{
    const char *slash = strchr(s, '/');
    if (!slash || slash == s || !slash[1] || strchr(slash + 1, '/') || s[0] == '.' || slash[1] == '.')
        return 0;
    for (const char *p = s; *p; p++)
        if (!(*p == '/' || *p == '-' || *p == '_' || *p == '.' || (*p >= '0' && *p <= '9') ||
              (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
            return 0;
    return 1;
}

/* repo (a models--ORG--NAME directory) -> repo/snapshots/REV, REV from repo/refs/main */
static char *snapshot_of(const char *repo, const char *shown, tq_err *e)
{
    char *ref = tq_path_join(repo, "refs/main", e);
    char *rev = NULL;
    size_t len = 0;
    if (!ref)
        return NULL;
    if (tq_read_small_file(ref, 256, &rev, &len, e) != 0) {
        tq_err_prefix(e, "%s: a HuggingFace cache entry without refs/main", shown);
        free(ref);
        return NULL;
    }
    free(ref);
    while (len && (rev[len - 1] == '\n' || rev[len - 1] == '\r'))
        rev[--len] = 0;
    char *snap = NULL;
    if (!len || strchr(rev, '/') || !strcmp(rev, "..") || !strcmp(rev, ".")) {
        tq_fail(e, TQ_EDATA, "%s: refs/main does not name a snapshot", shown);
    } else {
        char *rel = tq_asprintf(e, "snapshots/%s", rev);
        snap = rel ? tq_path_join(repo, rel, e) : NULL;
        free(rel);
        if (snap && !is_dir(snap)) {
            tq_fail(e, TQ_EDATA, "%s: snapshot %s (refs/main) is not in the cache: %s", shown, rev, snap);
            free(snap);
            snap = NULL;
        }
    }
    free(rev);
    return snap;
}

char *tq_hf_resolve(const char *arg, tq_err *e)
{
    struct stat st;
    if (stat(arg, &st) == 0) {
        /* a cache directory models--ORG--NAME (it has refs/ and snapshots/) */
        char *refs = tq_path_join(arg, "refs", e), *snaps = tq_path_join(arg, "snapshots", e);
        int cache = refs && snaps && S_ISDIR(st.st_mode) && is_dir(refs) && is_dir(snaps);
        free(refs);
        free(snaps);
        return cache ? snapshot_of(arg, arg, e) : tq_strdup(arg, e);
    }
    if (!is_repo_id(arg))
        return tq_strdup(arg, e); /* the caller's open names the missing path */
    char *hub = NULL;
    const char *v;
    if ((v = getenv("HF_HUB_CACHE")) && *v)
        hub = tq_strdup(v, e);
    else if ((v = getenv("HF_HOME")) && *v)
        hub = tq_path_join(v, "hub", e);
    else if ((v = getenv("HOME")) && *v)
        hub = tq_path_join(v, ".cache/huggingface/hub", e);
    else
        hub = tq_strdup(".cache/huggingface/hub", e);
    if (!hub)
        return NULL;
    const char *slash = strchr(arg, '/');
    char *name = tq_asprintf(e, "models--%.*s--%s", (int)(slash - arg), arg, slash + 1);
    char *repo = NULL, *snap = NULL;
    repo = name ? tq_path_join(hub, name, e) : NULL;
    if (repo && !is_dir(repo))
        tq_fail(e, TQ_EDATA, "%s: no such file or directory, and not in the HuggingFace cache (%s); tq reads the "
                "cache offline: download the model first", arg, repo);
    else if (repo)
        snap = snapshot_of(repo, arg, e);
    free(hub);
    free(name);
    free(repo);
    return snap;
}
