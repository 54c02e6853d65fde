/* JSON with sorted keys (cJSON): printing, reading and writing files, exact-integer helpers. */
#include "common/common.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int key_cmp(const cJSON *a, const cJSON *b)
{
    return strcmp(a->string ? a->string : "", b->string ? b->string : "");
}

/* Stable merge sort of a cJSON sibling list. */
static cJSON *merge_sort(cJSON *head)
{
    if (!head || !head->next)
        return head;
    cJSON *slow = head, *fast = head->next;
    while (fast && fast->next) {
        slow = slow->next;
        fast = fast->next->next;
    }
    cJSON *right = slow->next;
    slow->next = NULL;
    cJSON *l = merge_sort(head), *r = merge_sort(right);
    cJSON dummy = {0}, *tail = &dummy;
    while (l && r) {
        if (key_cmp(l, r) <= 0) {
            tail->next = l;
            l = l->next;
        } else {
            tail->next = r;
            r = r->next;
        }
        tail = tail->next;
    }
    tail->next = l ? l : r;
    return dummy.next;
}

void tq_json_sort(cJSON *j)
{
    if (!j)
        return;
    if (cJSON_IsObject(j) && j->child) {
        j->child = merge_sort(j->child);
        cJSON *prev = NULL;
        for (cJSON *c = j->child; c; c = c->next) {
            c->prev = prev;
            prev = c;
        }
        j->child->prev = prev; /* cJSON keeps the tail in head->prev */
    }
    for (cJSON *c = j->child; c; c = c->next)
        tq_json_sort(c);
}

char *tq_json_print(cJSON *j, tq_err *e)
{
    tq_json_sort(j);
    char *s = cJSON_Print(j);
    if (!s) {
        tq_fail(e, TQ_ENOMEM, "out of memory printing JSON");
        return NULL;
    }
    /* cJSON indents with tabs; use two spaces and end with a newline. */
    size_t tabs = 0, n = 0;
    for (; s[n]; n++)
        tabs += s[n] == '\t';
    char *out = tq_malloc(n + tabs + 2, e);
    if (!out) {
        cJSON_free(s);
        return NULL;
    }
    size_t o = 0;
    int in_str = 0, esc = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (in_str) {
            out[o++] = c;
            if (esc)
                esc = 0;
            else if (c == '\\')
                esc = 1;
            else if (c == '"')
                in_str = 0;
            continue;
        }
        if (c == '"')
            in_str = 1;
        if (c == '\t' && i > 0 && s[i - 1] == ':') {
            out[o++] = ' ';
        } else if (c == '\t') {
            out[o++] = ' ';
            out[o++] = ' ';
        } else {
            out[o++] = c;
        }
    }
    out[o++] = '\n';
    out[o] = 0;
    cJSON_free(s);
    return out;
}

int tq_json_write_file(const char *path, cJSON *j, tq_err *e)
{
    char *s = tq_json_print(j, e);
    if (!s)
        return -1;
    int rc = tq_write_file_atomic(path, s, strlen(s), e);
    free(s);
    return rc;
}

cJSON *tq_json_parse(const char *s, size_t len, size_t *at, int *trailing)
{
    const char *end = NULL;
    if (trailing)
        *trailing = 0;
    cJSON *j = cJSON_ParseWithLengthOpts(s, len, &end, 0);
    if (!j) {
        if (at)
            *at = end && end >= s && end <= s + len ? (size_t)(end - s) : 0;
        return NULL;
    }
    for (const char *p = end; p < s + len; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            cJSON_Delete(j);
            if (at)
                *at = (size_t)(p - s);
            if (trailing)
                *trailing = 1;
            return NULL;
        }
    return j;
}

static int cmp_keyp(const void *a, const void *b)
{
    return strcmp((*(cJSON *const *)a)->string, (*(cJSON *const *)b)->string);
}

/* The first key that some object in j holds twice: RFC 8259 (4) leaves the meaning of such a
 * document open (Python's json takes the last, cJSON's lookups the first), so a file whose
 * keys repeat is refused rather than read one way. Names the key with the path of its object
 * ("streaming.page_size"). Objects are sorted copies of their key pointers: O(n log n). */
static int dup_keys(const cJSON *j, char *path, size_t plen, size_t cap, const char *file, tq_err *e)
{
    size_t n = 0;
    for (const cJSON *c = j->child; c; c = c->next)
        n++;
    if (cJSON_IsObject(j) && n > 1) {
        const cJSON **v = tq_malloc(n * sizeof *v, e);
        if (!v)
            return -1;
        size_t i = 0;
        for (const cJSON *c = j->child; c; c = c->next)
            v[i++] = c;
        qsort(v, n, sizeof *v, cmp_keyp);
        for (i = 1; i < n; i++)
            if (!strcmp(v[i - 1]->string, v[i]->string)) {
                int rc = tq_fail(e, TQ_EDATA, "%s: key \"%s%s%s\" appears twice", file, path, plen ? "." : "",
                                 v[i]->string);
                free(v);
                return rc;
            }
        free(v);
    }
    for (const cJSON *c = j->child; c; c = c->next) {
        if (!c->child)
            continue;
        size_t l = plen;
        if (cJSON_IsObject(j)) {
            int k = snprintf(path + plen, cap - plen, "%s%s", plen ? "." : "", c->string);
            l = k < 0 || (size_t)k >= cap - plen ? cap - 1 : plen + (size_t)k;
        }
        int rc = dup_keys(c, path, l, cap, file, e);
        path[plen] = 0;
        if (rc)
            return rc;
    }
    return 0;
}

int tq_json_read_file(const char *path, size_t max, cJSON **out, tq_err *e)
{
    char *buf;
    size_t len, at;
    int trailing;
    if (tq_read_small_file(path, max, &buf, &len, e) != 0)
        return -1;
    cJSON *j = tq_json_parse(buf, len, &at, &trailing);
    free(buf);
    if (!j)
        return trailing ? tq_fail(e, TQ_EDATA, "%s: bytes after the JSON value at byte %zu", path, at)
                        : tq_fail(e, TQ_EDATA, "%s: invalid JSON near byte %zu", path, at);
    char kp[512] = "";
    if (dup_keys(j, kp, 0, sizeof kp, path, e) != 0) {
        cJSON_Delete(j);
        return -1;
    }
    *out = j;
    return 0;
}

int tq_json_u64(const cJSON *v, uint64_t *out)
{
    if (!cJSON_IsNumber(v))
        return -1;
    double d = v->valuedouble;
    if (!(d >= 0 && d <= TQ_JSON_MAX_INT) || floor(d) != d)
        return -1;
    *out = (uint64_t)d;
    return 0;
}

cJSON *tq_json_add_u64(cJSON *obj, const char *key, uint64_t v)
{
    return cJSON_AddNumberToObject(obj, key, (double)v);
}
