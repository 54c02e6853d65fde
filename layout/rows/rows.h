/* layout/rows/rows.h — tq-rowlayout: interleaved row files (mtplx_ngram_rows_v1 and
 * tq_rows_paged_v1) for SSD-resident n-gram and embedding tables. */
#ifndef TQ_ROWS_H
#define TQ_ROWS_H

#include "common/common.h"
#include "formats/formats.h"

TQ_BEGIN_DECLS

struct cJSON;

/* ================================================================ row files (tq-rowlayout)
 * Interleaved row files (man tq-formats(5), ROW FILES; docs/compatibility.md, MTPLX):
 *   mtplx_ngram_rows_v1  one U8 tensor PREFIX.records [rows, stride]; record r = row r of
 *                        PREFIX.weight, then .scales, then .biases (whichever exist).
 *   tq_rows_paged_v1     the same records placed so that none straddles a page_size page:
 *                        one U8 tensor PREFIX.pages [groups, group_bytes], data start page
 *                        aligned, zero padding. */
#define TQ_ROWS_FORMAT_V1 "mtplx_ngram_rows_v1"
#define TQ_ROWS_FORMAT_PAGED "tq_rows_paged_v1"
#define TQ_ROWS_MAX_PAGE (64ull << 20)

/* Identity of the source file a row file was made from. header_sha256 is the SHA-256 of
 * the source header re-serialized the way Python's json.dumps(h, sort_keys=True) does
 * (tq_json_canonical), so files made by MTPLX and by tq agree. */
typedef struct tq_rows_identity {
    uint64_t size;
    int64_t mtime_ns, ctime_ns;
    uint64_t device, inode;
    char header_sha256[65];
} tq_rows_identity;

/* hex SHA-256 of the canonical form of the JSON header text. */
TQ_API int tq_rows_header_sha256(const char *json, size_t len, const char *path, char hex[65], tq_err *e);

/* stat + header hash of PATH (follows symlinks, as os.stat does). */
TQ_API int tq_rows_identity_read(const char *path, tq_rows_identity *id, tq_err *e);
/* Canonical JSON text of the identity (exact 64-bit integers). Caller frees. */
TQ_API char *tq_rows_identity_json(const tq_rows_identity *id, tq_err *e);
/* Parse the metadata string `source` (any key order/spacing; exact integers). */
TQ_API int tq_rows_identity_parse(const char *text, tq_rows_identity *id, tq_err *e);
/* Empty string when equal, else "size 10 -> 12, mtime_ns ..., header_sha256 differs". */
TQ_API void tq_rows_identity_diff(const tq_rows_identity *was, const tq_rows_identity *now, char *buf, size_t cap);

#define TQ_ROWS_MAX_PARTS 3
typedef struct tq_rows_part {
    char name[8];        /* "weight", "scales", "biases" */
    tq_dtype dtype;
    uint64_t cols;       /* elements per row */
    uint64_t row_bytes;
    uint64_t pos;        /* byte offset of this part inside a record */
    uint64_t begin, end; /* data_offsets in the source header */
} tq_rows_part;

/* Where records live in the records tensor: record r starts at
 * (r / per_group) * group_bytes + (r % per_group) * slot. v1: per_group 1, slot = group
 * = stride. Paged: group_bytes a multiple of page, per_group * slot <= group_bytes. */
typedef struct tq_rows_geom {
    uint64_t rows, stride;
    int n_parts;
    tq_rows_part parts[TQ_ROWS_MAX_PARTS];
    uint64_t page;        /* 0: mtplx_ngram_rows_v1 */
    int pad_stride;       /* paged: slot = smallest divisor of page >= stride */
    uint64_t slot, per_group, group_bytes, groups;
    uint64_t data_bytes;  /* bytes of the records tensor */
} tq_rows_geom;

/* Fill the layout fields from rows/stride/page/pad_stride (page 0 = v1). */
TQ_API int tq_rows_geom_layout(tq_rows_geom *g, tq_err *e);
TQ_API uint64_t tq_rows_record_offset(const tq_rows_geom *g, uint64_t r);
/* Records that touch more pages of `page` bytes than ceil(stride / page) when the records
 * tensor starts at file offset data_start. */
TQ_API uint64_t tq_rows_count_straddles(const tq_rows_geom *g, uint64_t data_start, uint64_t page);

typedef struct tq_rows_opts {
    const char *prefix;   /* NULL: "ngram" (convert) / taken from the rows file */
    uint64_t page_align;  /* 0: mtplx_ngram_rows_v1 */
    int pad_stride;
    uint64_t chunk_bytes; /* 0: 8 MiB */
    int quiet;            /* no progress */
    int force;            /* replace an existing output file (else refused) */
    int force_space;      /* convert: start without checking that the file fits the free
                           * space (checked by default before the partial is made: TQ_EIO) */
    const tq_provenance *provenance; /* convert: recorded in the header as metadata
                                      * tq_provenance (NULL: none) */
} tq_rows_opts;

typedef struct tq_rows_report {
    char *format, *prefix, *output, *source_path, *kept_partial;
    uint64_t rows, row_bytes, bytes, file_bytes, data_start;
    uint64_t page_size, slot_bytes, per_group, group_bytes;
    uint64_t straddle_plain, straddle_paged;
    double elapsed_s;
    int all_rows_bit_exact;
    int byte_identical;   /* extract: the rebuilt file is the source file byte for byte */
    int have_source;
    tq_rows_identity source;
    size_t n_warnings;
    char *warnings[4];    /* convert: why MTPLX cannot load the output, or where it landed */
} tq_rows_report;

/* SOURCE -> OUT (refuses an existing OUT or OUT == SOURCE). On a source that changed during
 * the copy the partial file is kept and r->kept_partial names it. */
TQ_API int tq_rows_convert(const char *source, const char *out, const tq_rows_opts *o, tq_rows_report *r, tq_err *e);
/* Re-verify ROWS against SOURCE (NULL: the source_path recorded in ROWS); writes nothing. */
TQ_API int tq_rows_check(const char *rows, const char *source, const tq_rows_opts *o, tq_rows_report *r, tq_err *e);
/* Rebuild the source tensors from ROWS into DIR/<source file name>. */
TQ_API int tq_rows_extract(const char *rows, const char *dir, const tq_rows_opts *o, tq_rows_report *r, tq_err *e);
/* JSON object for a report (mode: "convert", "check", "extract"). */
TQ_API struct cJSON *tq_rows_report_json(const tq_rows_report *r, const char *mode);
TQ_API void tq_rows_report_free(tq_rows_report *r);

TQ_END_DECLS

#endif
