/* A small GGUF writer for tests and benchmarks only (tq never writes GGUF). */
#ifndef TQ_TEST_GGUF_WRITER_H
#define TQ_TEST_GGUF_WRITER_H

#include <stddef.h>
#include <stdint.h>

/* Growing little-endian byte buffer. */
typedef struct gb {
    unsigned char *p;
    size_t len, cap;
} gb;
void gb_bytes(gb *b, const void *p, size_t n);
void gb_u8(gb *b, uint8_t v);
void gb_u16(gb *b, uint16_t v);
void gb_u32(gb *b, uint32_t v);
void gb_u64(gb *b, uint64_t v);
void gb_f32(gb *b, float v);
void gb_f64(gb *b, double v);
void gb_str(gb *b, const char *s); /* u64 length + bytes */
void gb_free(gb *b);

typedef struct gw_tensor {
    char *name;
    uint32_t n_dims, type;
    uint64_t ne[4];
    unsigned char *data;
    uint64_t nbytes;
} gw_tensor;

typedef struct gw {
    uint32_t version;    /* 3 unless changed */
    uint32_t alignment;  /* layout alignment; add general.alignment yourself if not 32 */
    gb kv;               /* encoded key/value pairs */
    uint64_t n_kv;
    gw_tensor *t;
    size_t n_t;
} gw;

void gw_init(gw *w);
void gw_free(gw *w);
void gw_kv_u32(gw *w, const char *key, uint32_t v);
void gw_kv_i32(gw *w, const char *key, int32_t v);
void gw_kv_u64(gw *w, const char *key, uint64_t v);
void gw_kv_f32(gw *w, const char *key, float v);
void gw_kv_f64(gw *w, const char *key, double v);
void gw_kv_bool(gw *w, const char *key, int v);
void gw_kv_str(gw *w, const char *key, const char *v);
void gw_kv_str_array(gw *w, const char *key, const char *const *v, size_t n);
void gw_kv_i32_array(gw *w, const char *key, const int32_t *v, size_t n);
void gw_kv_f32_array(gw *w, const char *key, const float *v, size_t n);
void gw_kv_bool_array(gw *w, const char *key, const int *v, size_t n);
/* A small SentencePiece vocabulary (tokenizer.ggml.model "llama"): <unk> <s> </s> <0x41> ▁ a b
 * ▁a ab ▁ab with their token types and scores 0 0 0 0 -1 -2 -3 -4 -5 -6, so the merges derived
 * from the scores are ▁+a, a+b, ▁+ab, ▁a+b. */
void gw_spm_vocab(gw *w);
/* Adds a tensor (data copied; nbytes must be whole blocks of ne for every ggml type that ggml can
 * dequantize, ggml_grids.h: F32 ... MXFP4; the writer aborts otherwise). ne[0] is fastest.
 * gg_random_block (ggml_grids.h) makes valid blocks of each type. */
void gw_tensor_add(gw *w, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                   const void *data, uint64_t nbytes);
/* A tensor whose nbytes of data gw_write_fill produces in chunks (never all in memory). */
void gw_tensor_add_lazy(gw *w, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                        uint64_t nbytes);
typedef void (*gw_fill_fn)(size_t tensor, uint64_t off, unsigned char *buf, size_t len, void *ctx);
int gw_write_fill(const gw *w, const char *path, gw_fill_fn fill, void *ctx);
/* Whole file in memory / on disk. Tensors are laid out in order, each aligned. */
void gw_build(const gw *w, gb *out);
int gw_write(const gw *w, const char *path);

/* The row order llama.cpp's converter gives a llama Q or K projection in GGUF, an oracle for
 * the reader's inverse: w.reshape(n_head, 2, D/2, ...).swapaxes(1, 2).reshape(w.shape) with
 * D = rows / n_head, on rows of row_bytes bytes. */
void gw_llama_permute(const void *hf, void *gguf, uint64_t rows, size_t row_bytes, uint64_t n_head);

#endif
