/* Receipts of tq-rowlayout (printed sorted by tq_json_print). 64-bit integers go out as
 * raw digits: cJSON's doubles would round nanosecond times. */
#include "layout/rows/rows.h"
#include "layout/rows/rows_internal.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

void tq_rows_report_free(tq_rows_report *r)
{
    free(r->format);
    free(r->prefix);
    free(r->output);
    free(r->source_path);
    free(r->kept_partial);
    for (size_t i = 0; i < r->n_warnings; i++)
        free(r->warnings[i]);
    memset(r, 0, sizeof *r);
}

static void add_u64(cJSON *o, const char *k, uint64_t v)
{
    char t[32];
    snprintf(t, sizeof t, "%" PRIu64, v);
    cJSON_AddItemToObject(o, k, cJSON_CreateRaw(t));
}

static void add_i64(cJSON *o, const char *k, int64_t v)
{
    char t[32];
    snprintf(t, sizeof t, "%" PRId64, v);
    cJSON_AddItemToObject(o, k, cJSON_CreateRaw(t));
}

cJSON *tq_rows_report_json(const tq_rows_report *r, const char *mode)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    add_u64(o, "rows", r->rows);
    add_u64(o, "row_bytes", r->row_bytes);
    add_u64(o, "bytes", r->bytes);
    add_u64(o, "file_bytes", r->file_bytes);
    cJSON_AddNumberToObject(o, "elapsed_s", (double)(int64_t)(r->elapsed_s * 1000 + 0.5) / 1000);
    cJSON_AddBoolToObject(o, "all_rows_bit_exact", r->all_rows_bit_exact);
    cJSON_AddStringToObject(o, "output", r->output ? r->output : "");
    cJSON_AddStringToObject(o, "format", r->format ? r->format : "");
    cJSON_AddStringToObject(o, "prefix", r->prefix ? r->prefix : "");
    cJSON_AddStringToObject(o, "mode", mode);
    if (r->n_warnings) {
        cJSON *w = cJSON_AddArrayToObject(o, "warnings");
        for (size_t i = 0; w && i < r->n_warnings; i++)
            cJSON_AddItemToArray(w, cJSON_CreateString(r->warnings[i]));
    }
    if (r->source_path)
        cJSON_AddStringToObject(o, "source_path", r->source_path);
    if (r->have_source) {
        cJSON *s = cJSON_CreateObject();
        add_u64(s, "size", r->source.size);
        add_i64(s, "mtime_ns", r->source.mtime_ns);
        add_i64(s, "ctime_ns", r->source.ctime_ns);
        add_u64(s, "device", r->source.device);
        add_u64(s, "inode", r->source.inode);
        cJSON_AddStringToObject(s, "header_sha256", r->source.header_sha256);
        cJSON_AddItemToObject(o, "source", s);
    }
    if (r->page_size) {
        add_u64(o, "page_size", r->page_size);
        if (strcmp(mode, "extract")) {
            add_u64(o, "slot_bytes", r->slot_bytes);
            add_u64(o, "records_per_group", r->per_group);
            add_u64(o, "group_bytes", r->group_bytes);
        }
        if (!strcmp(mode, "convert")) {
            cJSON *s = cJSON_CreateObject();
            add_u64(s, "plain", r->straddle_plain);
            add_u64(s, "paged", r->straddle_paged);
            cJSON_AddItemToObject(o, "records_straddling_a_page", s);
        }
    }
    if (!strcmp(mode, "extract"))
        cJSON_AddBoolToObject(o, "byte_identical_to_source", r->byte_identical);
    return o;
}
