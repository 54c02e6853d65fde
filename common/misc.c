/* Sizes ("512M" both ways), thread count (common/platform.h), clocks, peak RSS, CRC-32, power-of-two alignment. */
#include "common/common.h"
#include "common/platform.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

int tq_parse_size(const char *s, uint64_t *out)
{
    int unit;
    return tq_parse_size_unit(s, out, &unit);
}

int tq_parse_size_unit(const char *s, uint64_t *out, int *unit)
{
    *unit = 0;
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || v < 0 || !isfinite(v))
        return -1;
    uint64_t mult = 1;
    switch (toupper((unsigned char)*end)) {
    case 0: break;
    case 'K': mult = 1ull << 10; end++; break;
    case 'M': mult = 1ull << 20; end++; break;
    case 'G': mult = 1ull << 30; end++; break;
    case 'T': mult = 1ull << 40; end++; break;
    case 'B': /* "16B": bytes, said so (lower-case b could be bits: refused) */
        if (*end != 'B')
            return -1;
        break;
    default: return -1;
    }
    if (mult > 1 && (*end == 'i' || *end == 'I'))
        end++;
    if (mult > 1 && (*end == 'b' || *end == 'B'))
        end++;
    if (*end == 'B' && mult == 1)
        end++;
    if (*end)
        return -1;
    *unit = *s && end > s && !isdigit((unsigned char)end[-1]) && end[-1] != '.';
    double r = v * (double)mult;
    if (r >= 18446744073709551616.0)
        return -1;
    *out = (uint64_t)r;
    return 0;
}

const char *tq_parse_udec(const char *s, uint64_t max, uint64_t *out)
{
    if (*s < '0' || *s > '9' || (s[0] == '0' && s[1] >= '0' && s[1] <= '9'))
        return NULL;
    uint64_t v = 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        const uint64_t d = (uint64_t)(*s - '0');
        if (d > max || v > (max - d) / 10)
            return NULL;
        v = v * 10 + d;
    }
    *out = v;
    return s;
}

int tq_parse_ids(const char *s, int32_t **out, size_t *n, tq_err *e)
{
    size_t cap = 1;
    for (const char *p = s; *p; p++)
        cap += *p == ',';
    int32_t *v = tq_malloc(cap * sizeof *v, e);
    if (!v)
        return -1;
    size_t k = 0;
    for (const char *p = s;; p++) {
        const char *start = p;
        uint64_t x = 0;
        for (; *p >= '0' && *p <= '9'; p++) {
            x = x * 10 + (uint64_t)(*p - '0');
            if (x > INT32_MAX)
                break;
        }
        if (p == start || x > INT32_MAX || (*p && *p != ',')) {
            free(v);
            return tq_fail(e, TQ_EUSAGE, "id %zu ('%.*s'): expected a decimal number 0..%ld", k + 1,
                           (int)strcspn(start, ","), start, (long)INT32_MAX);
        }
        v[k++] = (int32_t)x;
        if (!*p)
            break;
    }
    *out = v;
    *n = k;
    return 0;
}

void tq_format_size(uint64_t n, char *buf, size_t cap)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)n;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, cap, "%llu B", (unsigned long long)n);
    else
        snprintf(buf, cap, "%.2f %s", v, units[u]);
}
int tq_default_threads(void)
{
    int n = tq_plat_cpus();
    return n < 1 ? 1 : n > 256 ? 256 : n;
}

double tq_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

uint64_t tq_peak_rss(void)
{
    return tq_plat_peak_rss();
}

uint32_t tq_crc32(const void *data, size_t len)
{
    static uint32_t table[256];
    static int ready;
    if (!ready) { /* benign race: every thread computes the same table */
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
        ready = 1;
    }
    const unsigned char *p = data;
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < len; i++)
        c = table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

int tq_align_up(uint64_t x, uint64_t a, uint64_t *out)
{
    if (a == 0 || (a & (a - 1)))
        return -1;
    uint64_t t;
    if (tq_add_u64(x, a - 1, &t) != 0)
        return -1;
    *out = t & ~(a - 1);
    return 0;
}

int tq_parse_id_text(char *buf, size_t len, int32_t **ids, size_t *n, tq_err *e)
{
    const char *nul = memchr(buf, 0, len);
    if (nul) /* "1\0002" would otherwise read as "1" */
        return tq_fail(e, TQ_EUSAGE, "a NUL byte at offset %zu: token ids are text", (size_t)(nul - buf));
    char *p = buf, *end = buf + len;
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    while (end > p && (end[-1] == ' ' || end[-1] == '\n' || end[-1] == '\r' || end[-1] == '\t'))
        end--;
    *end = 0;
    *ids = NULL;
    *n = 0;
    return p < end ? tq_parse_ids(p, ids, n, e) : 0;
}
