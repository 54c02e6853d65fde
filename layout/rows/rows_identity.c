/* Source identity of a row file: the same fields MTPLX records (size, mtime_ns, ctime_ns,
 * device, inode, header_sha256), so a row file is bound to one exact source file. */
#include "layout/rows/rows.h"
#include "layout/rows/rows_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int rows_identity_fd(int fd, const char *path, tq_rows_identity *id, tq_err *e)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return tq_fail(e, TQ_EIO, "%s: cannot stat: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return tq_fail(e, TQ_EDATA, "%s: not a regular file", path);
    tq_file_id fid;
    tq_file_id_stat(&st, &fid);
    memset(id, 0, sizeof *id);
    id->size = fid.size;
    id->mtime_ns = fid.mtime_ns;
    id->ctime_ns = fid.ctime_ns;
    id->device = fid.dev;
    id->inode = fid.ino;
    char *json;
    uint64_t len;
    if (tq_st_read_header(fd, id->size, path, &json, &len, e) != 0)
        return -1;
    int rc = tq_rows_header_sha256(json, (size_t)len, path, id->header_sha256, e);
    free(json);
    return rc;
}

int tq_rows_identity_read(const char *path, tq_rows_identity *id, tq_err *e)
{
    int fd = tq_open_regular(path, NULL, e);
    if (fd < 0)
        return -1;
    int rc = rows_identity_fd(fd, path, id, e);
    close(fd);
    return rc;
}

/* Key order of MTPLX's dict does not matter to readers (they compare parsed values); the
 * canonical form is sorted. */
char *tq_rows_identity_json(const tq_rows_identity *id, tq_err *e)
{
    char t[6][80];
    snprintf(t[0], sizeof t[0], "%" PRId64, id->ctime_ns);
    snprintf(t[1], sizeof t[1], "%" PRIu64, id->device);
    snprintf(t[2], sizeof t[2], "\"%s\"", id->header_sha256);
    snprintf(t[3], sizeof t[3], "%" PRIu64, id->inode);
    snprintf(t[4], sizeof t[4], "%" PRId64, id->mtime_ns);
    snprintf(t[5], sizeof t[5], "%" PRIu64, id->size);
    static const char *keys[6] = {"ctime_ns", "device", "header_sha256", "inode", "mtime_ns", "size"};
    tq_sb b = {0};
    tq_sb_str(&b, "{");
    for (int i = 0; i < 6; i++)
        tq_sb_printf(&b, "%s\"%s\": %s", i ? ", " : "", keys[i], t[i]);
    tq_sb_str(&b, "}");
    return tq_sb_finish(&b, e);
}

/* cJSON keeps numbers as doubles, which cannot hold nanosecond times or 64-bit inodes, so
 * the integers are taken from the text: cJSON first proves the text is a flat object with
 * exactly the six keys (no escapes in them), then each key's digits are located. */
static const char *id_keys[6] = {"size", "mtime_ns", "ctime_ns", "device", "inode", "header_sha256"};

static int exact_int(const char *text, const char *key, int sign_ok, uint64_t *mag, int *neg)
{
    char pat[40];
    snprintf(pat, sizeof pat, "\"%s\"", key);
    const char *p = strstr(text, pat);
    if (!p || strstr(p + 1, pat))
        return -1;
    p += strlen(pat);
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    if (*p++ != ':')
        return -1;
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    *neg = 0;
    if (*p == '-' && sign_ok) {
        *neg = 1;
        p++;
    }
    uint64_t v;
    if (!(p = tq_parse_udec(p, UINT64_MAX, &v)))
        return -1;
    if (*p != ',' && *p != '}' && *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
        return -1;
    *mag = v;
    return 0;
}

int tq_rows_identity_parse(const char *text, tq_rows_identity *id, tq_err *e)
{
    cJSON *j = tq_json_parse(text, strlen(text), NULL, NULL);
    if (!j || !cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return tq_fail(e, TQ_EDATA, "source identity is not a JSON object");
    }
    int n = 0, ok = 1;
    for (cJSON *c = j->child; c; c = c->next) {
        n++;
        int known = 0;
        for (int i = 0; i < 6; i++)
            known |= !strcmp(c->string, id_keys[i]);
        if (!known)
            ok = 0;
        if (!strcmp(c->string, "header_sha256")) {
            if (!cJSON_IsString(c) || strlen(c->valuestring) != 64 ||
                strspn(c->valuestring, "0123456789abcdef") != 64)
                ok = 0;
            else
                memcpy(id->header_sha256, c->valuestring, 65);
        } else if (!cJSON_IsNumber(c)) {
            ok = 0;
        }
    }
    cJSON_Delete(j);
    if (!ok || n != 6)
        return tq_fail(e, TQ_EDATA, "source identity must have exactly the keys size, mtime_ns, ctime_ns, device, inode, header_sha256 with integer values and a hex SHA-256");
    uint64_t v[5];
    for (int i = 0; i < 5; i++) {
        int neg;
        int sign_ok = i == 1 || i == 2;
        if (exact_int(text, id_keys[i], sign_ok, &v[i], &neg) != 0 || (neg && v[i] > (uint64_t)INT64_MAX) ||
            (sign_ok && v[i] > (uint64_t)INT64_MAX))
            return tq_fail(e, TQ_EDATA, "source identity: '%s' is not an exact integer", id_keys[i]);
        if (neg)
            v[i] = (uint64_t)(-(int64_t)v[i]);
    }
    id->size = v[0];
    id->mtime_ns = (int64_t)v[1];
    id->ctime_ns = (int64_t)v[2];
    id->device = v[3];
    id->inode = v[4];
    return 0;
}

static void as_file_id(const tq_rows_identity *r, tq_file_id *f)
{
    memset(f, 0, sizeof *f);
    f->dev = r->device;
    f->ino = r->inode;
    f->size = r->size;
    f->mtime_ns = r->mtime_ns;
    f->ctime_ns = r->ctime_ns;
}

/* common/'s wording for the stat fields, then the header hash MTPLX records */
void tq_rows_identity_diff(const tq_rows_identity *a, const tq_rows_identity *b, char *buf, size_t cap)
{
    tq_file_id fa, fb;
    as_file_id(a, &fa);
    as_file_id(b, &fb);
    tq_file_id_diff(&fa, &fb, buf, cap);
    size_t n = strlen(buf);
    if (strcmp(a->header_sha256, b->header_sha256) && n < cap)
        snprintf(buf + n, cap - n, "%sheader_sha256 %.12s... -> %.12s...", n ? ", " : "", a->header_sha256,
                 b->header_sha256);
}
