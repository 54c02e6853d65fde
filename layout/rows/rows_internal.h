/* layout/rows/rows_internal.h — shared between the layout/rows/rows_*.c files only. */
#ifndef TQ_ROWS_INTERNAL_H
#define TQ_ROWS_INTERNAL_H

#include "layout/rows/rows.h"

#include <sys/types.h>

struct cJSON;

int rows_identity_fd(int fd, const char *path, tq_rows_identity *id, tq_err *e);

/* The source table: validated safetensors file, its parts, its identity. */
typedef struct rows_table {
    tq_st_file *st;
    struct cJSON *hdr;      /* parsed source header */
    char *prefix;
    char *path_abs;         /* realpath of the source */
    tq_rows_identity id;
    tq_rows_geom g;         /* parts, rows, stride (layout not filled) */
    uint64_t src_off[TQ_ROWS_MAX_PARTS]; /* absolute file offset of each part's tensor */
    char *parts_json;       /* canonical [[name, entry], ...] */
    char *provenance;       /* canonical tq_provenance_v1 document, or NULL */
} rows_table;
int rows_table_open(rows_table *t, const char *path, const char *prefix, tq_err *e);
void rows_table_close(rows_table *t);

/* A row file opened for reading (check, extract), every field validated. */
typedef struct rows_file {
    char *path;
    int fd;
    uint64_t size, header_len, data_start;
    int paged;
    char *prefix;
    tq_rows_geom g;
    tq_rows_identity id;
    char *parts_json;       /* canonical form of the stored parts */
    char *source_path;      /* NULL when not recorded */
    char *source_header;    /* raw source header bytes, NULL when not recorded */
    size_t source_header_len;
} rows_file;
int rows_file_open(rows_file *f, const char *path, tq_err *e);
/* The same from header bytes (fuzzing); file_size UINT64_MAX skips the file size check. */
int rows_file_parse(rows_file *f, const char *json, uint64_t header_len, uint64_t file_size, const char *path,
                    tq_err *e);
void rows_file_close(rows_file *f);

/* Header (8-byte length + padded JSON) of a row file; data starts at *data_start. */
int rows_build_header(const rows_table *t, const tq_rows_geom *g, char **out, uint64_t *len,
                      uint64_t *data_start, tq_err *e);
/* Geometry (parts) from a canonical parts JSON, checked against rows. */
int rows_parts_from_json(const char *text, uint64_t rows, tq_rows_geom *g, tq_err *e);

/* ---- the chunk engine: one pass over the records tensor in bounded chunks ---- */
typedef struct rows_mismatch {
    uint64_t row;
    int part;               /* -1: padding byte */
    uint64_t byte;          /* byte within the part's row (or records-tensor offset for padding) */
    uint64_t offset;        /* records-tensor offset of the byte */
    unsigned char got, want;
} rows_mismatch;

typedef struct rows_io {
    const tq_rows_geom *g;
    uint64_t chunk;
    unsigned char *src;     /* source bytes of every part for one chunk */
    unsigned char *out;     /* records bytes assembled from src */
    unsigned char *rb;      /* records bytes read back from a file */
    /* per chunk: part p's bytes are src[sbo[p], sbo[p] + slen[p]), taken from the part's
     * tensor at byte offset soff[p] (relative to the tensor) */
    uint64_t soff[TQ_ROWS_MAX_PARTS], slen[TQ_ROWS_MAX_PARTS], sbo[TQ_ROWS_MAX_PARTS];
    uint64_t r0, r1;
} rows_io;
int rows_io_init(rows_io *io, const tq_rows_geom *g, uint64_t chunk, tq_err *e);
void rows_io_free(rows_io *io);
/* End of the chunk that starts at o0. */
uint64_t rows_io_next(const rows_io *io, uint64_t o0);
/* Plan [o0, o1): which rows, which bytes of each part. */
void rows_io_plan(rows_io *io, uint64_t o0, uint64_t o1);
/* src -> out (padding zero). */
void rows_io_scatter(rows_io *io, uint64_t o0, uint64_t o1);
/* rb -> src (extract). */
void rows_io_gather(rows_io *io, uint64_t o0, uint64_t o1);
/* Compare rb with src and padding with zero; 0 when equal, else 1 and *m = first difference. */
int rows_io_compare(const rows_io *io, uint64_t o0, uint64_t o1, rows_mismatch *m);
/* Read every part's planned bytes from the source file (part tensors at src_off[p]). */
int rows_io_read_source(rows_io *io, int fd, const uint64_t *src_off, const char *path, tq_err *e);
/* Message for a mismatch: "row R (part 'scales' byte B, file offset X): 0x.. in WHAT, 0x.. in SOURCE" */
void rows_mismatch_describe(const rows_mismatch *m, const tq_rows_geom *g, uint64_t data_start,
                            char *buf, size_t cap);

/* Outputs: refuse OUT when it is SOURCE (any name: a path conflict, TQ_EUSAGE) or when
 * tq_out_file_check does;
 * reserve the size. Commit and keep are tq_afile_commit / tq_afile_keep (TQ_AFILE_REPLACE with --force). */
int rows_out_refuse(const char *out, const char *source, int force, tq_err *e);
int rows_out_reserve(tq_afile *f, uint64_t size, tq_err *e);

#endif
