/* Output directories that appear all at once: built as OUT.partial-XXXXXX, renamed last. */
#include "layout/layout_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int tq_stage_create(const char *out_dir, char **stage, tq_err *e)
{
    *stage = NULL;
    struct stat st;
    if (lstat(out_dir, &st) == 0) {
        if (!S_ISDIR(st.st_mode))
            return tq_fail(e, TQ_EEXIST, "%s: exists and is not a directory", out_dir);
        DIR *d = opendir(out_dir);
        struct dirent *de;
        int empty = 1;
        while (d && (de = readdir(d)))
            if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                empty = 0;
        if (d)
            closedir(d);
        if (!empty)
            return tq_fail(e, TQ_EEXIST, "%s: exists and is not empty; refusing to overwrite", out_dir);
    }
    size_t len = strlen(out_dir);
    while (len > 1 && out_dir[len - 1] == '/')
        len--;
    char *s = tq_malloc(len + sizeof ".partial-XXXXXX", e);
    if (!s)
        return -1;
    memcpy(s, out_dir, len);
    memcpy(s + len, ".partial-XXXXXX", sizeof ".partial-XXXXXX");
    if (!mkdtemp(s)) {
        int err = errno;
        free(s);
        return tq_fail(e, TQ_EIO, "%s: cannot create the output directory: %s", out_dir, strerror(err));
    }
    chmod(s, 0755);
    *stage = s;
    return 0;
}

int tq_stage_commit(const char *stage, const char *out_dir, tq_err *e)
{
    /* rename(2) replaces an empty directory atomically; a non-empty one was refused earlier */
    if (rename(stage, out_dir) != 0)
        return tq_fail(e, TQ_EIO, "%s: cannot rename %s into place: %s", out_dir, stage, strerror(errno));
    char *parent = strdup(out_dir);
    if (parent) {
        char *slash = strrchr(parent, '/');
        if (slash)
            *(slash == parent ? slash + 1 : slash) = 0;
        int dfd = open(slash ? parent : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            fsync(dfd);
            close(dfd);
        }
        free(parent);
    }
    return 0;
}
