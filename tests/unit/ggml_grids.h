/* tests/unit/ggml_grids.h — a slow, per-element reference for every ggml block type, written
 * from the published block layouts (ggml-common.h) and ggml's compact lattice lists, sharing no
 * code or table with formats/; and random valid blocks of each type for the tests. */
#ifndef TQ_TEST_GGML_GRIDS_H
#define TQ_TEST_GGML_GRIDS_H

#include <stddef.h>
#include <stdint.h>

/* ggml's compact lattice lists: entry k holds grid point k as 2-bit (8-wide grids) or 3-bit
 * (4-wide grids) level codes, element j at bits 2j (3j). */
extern const uint16_t gg_compact_2bit_256[256], gg_compact_2bit_512[512], gg_compact_2bit_1024[1024],
    gg_compact_1bit_2048[2048], gg_compact_3bit_256[256], gg_compact_3bit_512[512];

/* Level code -> grid value of each lattice family (the published expanded tables use these). */
int gg_level_iq2(unsigned code);   /* IQ2_XXS/XS/S: 8, 25, 43 */
int gg_level_iq1(unsigned code);   /* IQ1_S/M: -1, 0, +1 */
int gg_level_iq3xxs(unsigned code); /* 4, 12, ..., 52, 62 */
int gg_level_iq3s(unsigned code);  /* 1, 3, ..., 15 */
/* Value j of grid point k of a lattice given by its compact list, code width and level map. */
int gg_grid_value(const uint16_t *compact, int bits, int (*level)(unsigned), unsigned k, int j);

/* Block geometry of the ggml types this reference knows; -1 otherwise. */
int gg_type_geometry(uint32_t type, uint32_t *elems, uint32_t *bytes);
const char *gg_type_name(uint32_t type);
/* Element e of one block of `type`, decoded from scratch. */
float gg_ref_element(uint32_t type, const unsigned char *block, uint32_t e);
/* A random block with finite, varied scales (signed, zero, subnormal, large); variant 1 sets
 * every index bit (the highest grid entries), variant 0 is random. */
void gg_random_block(uint32_t type, uint64_t *rng, int variant, unsigned char *block);
uint64_t gg_rng(uint64_t *s);
/* Byte offset and width (2: f16, 4: f32, 1: E8M0) of a block's main scale, for the tests that
 * make it impossible; IQ1_M returns -1 (its scale is spread over four nibbles). */
int gg_scale_field(uint32_t type, uint32_t *off, uint32_t *width);

#endif
