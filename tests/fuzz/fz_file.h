/* Scratch directory for fuzz targets whose library entry point reads files (model
 * directories, split.json, bundles): the input is written to a file there and the real entry
 * point opens it. Linked into every fuzz program (fz_file.c). */
#ifndef TQ_FZ_FILE_H
#define TQ_FZ_FILE_H

#include <stddef.h>
#include <stdint.h>

/* The per-process scratch directory (created on first use, removed at exit). */
const char *fz_dir(void);
/* fz_dir()/rel, in a static buffer (one at a time). */
const char *fz_path(const char *rel);
/* Replace fz_dir()/rel with exactly data[0..size). */
void fz_write(const char *rel, const uint8_t *data, size_t size);
/* With TQ_FUZZ_VERBOSE set (replaying a corpus by hand), say why an input was refused. */
void fz_note(const char *msg);

#endif
