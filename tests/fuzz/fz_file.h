/* Scratch directory for fuzz targets whose library entry point reads files (model
 * directories, split.json, bundles): the input is written to a file there and the real entry
 * point opens it; and the tiny generated model such a target puts its input into. Linked
 * into every fuzz program (fz_file.c). */
#ifndef TQ_FZ_FILE_H
#define TQ_FZ_FILE_H

#include "testdata/mkmodel/mkmodel.h"

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
/* Options for a fuzz target's model: arch's tiny preset, quiet, one thread. */
void fz_mk_opts(tq_mk_opts *o, tq_mk_arch arch);
/* The smallest MoE model the config and split targets use: qwen3_moe, 2 layers, 4 experts,
 * hidden 64, vocab 64. */
void fz_mk_small_moe(tq_mk_opts *o);
/* Generates the model o describes in fz_dir()/rel and returns that directory's path
 * (allocated, kept for the process). Aborts when generation fails. */
const char *fz_mkmodel(const char *rel, const tq_mk_opts *o);

#endif
