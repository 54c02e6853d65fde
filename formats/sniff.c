/* formats/sniff.c — what a file is, from its first bytes, so that an error about a wrong
 * input says what was given and what was expected. */
#include "formats/formats.h"

#include <string.h>

static uint64_t le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

tq_content_kind tq_sniff(const void *head, size_t n, uint64_t file_size)
{
    const unsigned char *p = head;
    if (n >= 4 && !memcmp(p, "GGUF", 4))
        return TQ_CONTENT_GGUF;
    if (n >= 4 && !memcmp(p, "\x28\xb5\x2f\xfd", 4))
        return TQ_CONTENT_ZSTD;
    if (n >= 9 && p[8] == '{') {
        uint64_t len = le64(p);
        if (len >= 2 && file_size >= 8 && len <= file_size - 8)
            return TQ_CONTENT_SAFETENSORS;
    }
    size_t i = 0;
    if (n >= 3 && !memcmp(p, "\xef\xbb\xbf", 3)) /* a UTF-8 byte order mark */
        i = 3;
    while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r'))
        i++;
    if (i < n && (p[i] == '{' || p[i] == '[')) {
        /* a tq-split layer file's header page: JSON with sorted keys, "format" first */
        static const char *const layer[] = {"{\"format\":\"moe_flash_v1\"", "{\"format\":\"flash_aligned_v1\""};
        for (size_t k = 0; k < 2; k++)
            if (n - i >= strlen(layer[k]) && !memcmp(p + i, layer[k], strlen(layer[k])))
                return TQ_CONTENT_LAYER;
        return TQ_CONTENT_JSON;
    }
    return TQ_CONTENT_UNKNOWN;
}

tq_content_kind tq_sniff_fd(int fd, uint64_t file_size)
{
    unsigned char head[64];
    size_t n = file_size < sizeof head ? (size_t)file_size : sizeof head;
    if (tq_pread_full(fd, head, n, 0, "", NULL) != 0)
        return TQ_CONTENT_UNKNOWN;
    return tq_sniff(head, n, file_size);
}

const char *tq_content_name(tq_content_kind k)
{
    switch (k) {
    case TQ_CONTENT_SAFETENSORS: return "a safetensors file";
    case TQ_CONTENT_GGUF: return "a GGUF file";
    case TQ_CONTENT_JSON: return "a JSON file";
    case TQ_CONTENT_LAYER: return "a tq-split layer file";
    case TQ_CONTENT_ZSTD: return "a zstd-compressed file";
    default: return "a file of unknown kind";
    }
}

const char *tq_content_hint(tq_content_kind k)
{
    switch (k) {
    case TQ_CONTENT_SAFETENSORS: return "a safetensors file is read by its .safetensors name or its model directory";
    case TQ_CONTENT_GGUF: return "GGUF input is read from a file named *.gguf";
    case TQ_CONTENT_JSON: return "give the model directory or its .safetensors files";
    case TQ_CONTENT_LAYER: return "give the split directory (pinned.safetensors, split.json, experts/)";
    case TQ_CONTENT_ZSTD: return "a .tar.zst bundle is extracted by tq-verify unpack";
    default: return "";
    }
}
