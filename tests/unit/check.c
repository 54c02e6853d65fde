/* Helpers shared by the unit tests (declared in check.h): file comparison, deterministic
 * random numbers, scratch paths, counting leftovers. */
#include "check.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

int t_failed_here, t_pass, t_fail;
const char *t_current;

/* Line-buffered stdout, set before any output: a case that dies has printed everything up to
 * its last line (a pipe would otherwise hold up to a buffer's worth back). */
__attribute__((constructor)) static void t_line_buffered(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
}

int t_files_equal(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int eq = fa && fb;
    static unsigned char ba[1 << 16], bb[1 << 16];
    while (eq) {
        size_t na = fread(ba, 1, sizeof ba, fa), nb = fread(bb, 1, sizeof bb, fb);
        eq = na == nb && !memcmp(ba, bb, na) && !ferror(fa) && !ferror(fb);
        if (na < sizeof ba)
            break;
    }
    if (fa)
        fclose(fa);
    if (fb)
        fclose(fb);
    return eq;
}

double t_urand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return ((*s >> 11) + 0.5) * 0x1p-53;
}
double t_nrand(uint64_t *s)
{
    double r = sqrt(-2 * log(t_urand(s)));
    return r * cos(6.283185307179586 * t_urand(s));
}

const char *t_tmpdir(void)
{
    const char *d = getenv("TQ_TMP");
    return d && *d ? d : "/tmp";
}

char *t_path(const char *name)
{
    static char buf[16][1024];
    static int k;
    k = (k + 1) % 16;
    snprintf(buf[k], sizeof buf[k], "%s/%s", t_tmpdir(), name);
    return buf[k];
}

void t_flip_byte(const char *path, uint64_t off, unsigned char x)
{
    int fd = open(path, O_RDWR);
    unsigned char c = 0;
    int ok = fd >= 0 && pread(fd, &c, 1, (off_t)off) == 1;
    c ^= x;
    ok = ok && pwrite(fd, &c, 1, (off_t)off) == 1;
    if (fd >= 0)
        close(fd);
    CHECKF(ok, "cannot flip byte %llu of %s", (unsigned long long)off, path);
}

int t_count_prefixed(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        n += !strncmp(de->d_name, prefix, strlen(prefix));
    if (d)
        closedir(d);
    return n;
}

int t_env_lists(const char *var, const char *name)
{
    const char *want = getenv(var);
    if (!want)
        return 1;
    size_t n = strlen(name);
    for (const char *p = want; (p = strstr(p, name)) != NULL; p += n)
        if ((p == want || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
            return 1;
    return 0;
}
