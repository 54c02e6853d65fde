/* common/out_plan.c — what a dry run says an output will hold: each file's name (relative to
 * the output directory) and exact size, listed without writing anything. */
#include "common/common.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

int tq_out_plan_add(tq_out_plan *p, const char *name, uint64_t size, tq_err *e)
{
    tq_out_file *v = tq_grow(p->v, &p->cap, p->n, sizeof *p->v, e);
    if (!v)
        return -1;
    p->v = v;
    if (!(v[p->n].name = tq_strdup(name, e)))
        return -1;
    v[p->n++].size = size;
    return 0;
}

int tq_out_plan_add_json(tq_out_plan *p, const char *name, struct cJSON *j, tq_err *e)
{
    char *s = tq_json_print(j, e);
    if (!s)
        return -1;
    int rc = tq_out_plan_add(p, name, strlen(s), e);
    free(s);
    return rc;
}

static int cmp_file(const void *a, const void *b)
{
    return strcmp(((const tq_out_file *)a)->name, ((const tq_out_file *)b)->name);
}

void tq_out_plan_sort(tq_out_plan *p)
{
    if (p->n)
        qsort(p->v, p->n, sizeof *p->v, cmp_file);
}

uint64_t tq_out_plan_total(const tq_out_plan *p)
{
    uint64_t t = 0;
    for (size_t i = 0; i < p->n; i++)
        t += p->v[i].size;
    return t;
}

struct cJSON *tq_out_plan_json(const tq_out_plan *p)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < p->n; i++) {
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(a, o) || !cJSON_AddStringToObject(o, "name", p->v[i].name) ||
            !tq_json_add_u64(o, "size", p->v[i].size)) {
            cJSON_Delete(a);
            return NULL;
        }
    }
    return a;
}

void tq_out_plan_free(tq_out_plan *p)
{
    for (size_t i = 0; i < p->n; i++)
        free(p->v[i].name);
    free(p->v);
    memset(p, 0, sizeof *p);
}
