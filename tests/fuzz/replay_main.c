/* Standalone driver for the fuzz targets: runs LLVMFuzzerTestOneInput over every file named
 * on the command line (seed corpus + regression files), so make check replays them with the
 * normal (or ASan) build and no fuzzer runtime. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv)
{
    int n = 0;
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (!f) {
            fprintf(stderr, "%s: cannot open\n", argv[i]);
            return 2;
        }
        size_t cap = 1 << 16, len = 0;
        uint8_t *buf = malloc(cap);
        size_t got;
        while (buf && (got = fread(buf + len, 1, cap - len, f)) > 0) {
            len += got;
            if (len == cap) {
                uint8_t *nb = realloc(buf, cap *= 2);
                if (!nb) {
                    free(buf);
                    buf = NULL;
                }
                buf = nb;
            }
        }
        fclose(f);
        if (!buf) {
            fprintf(stderr, "%s: out of memory\n", argv[i]);
            return 2;
        }
        LLVMFuzzerTestOneInput(buf, len);
        free(buf);
        n++;
    }
    printf("replayed %d inputs\n", n);
    return 0;
}
