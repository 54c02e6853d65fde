/* transformers' float gpt-oss experts (x @ W, gate/up interleaved) read as mlx-lm's per-expert
 * gate_proj / up_proj / down_proj: the index map tq-split and tq-run share (formats/flash.h). */
#include "formats/flash.h"

#include <string.h>

tq_xw_part tq_flash_xw_part(int k, uint64_t I, uint64_t H)
{
    switch (k) {
    case TQ_XW_GATE_W: /* gate_proj.weight[i][h] = gate_up_proj[h][2i] */
    case TQ_XW_UP_W:   /* up_proj.weight[i][h] = gate_up_proj[h][2i + 1] */
        return (tq_xw_part){I, H, (uint64_t)(k == TQ_XW_UP_W), 2, 2 * I};
    case TQ_XW_DOWN_W: /* down_proj.weight[h][i] = down_proj[i][h] */
        return (tq_xw_part){H, I, 0, 1, H};
    default:           /* gate_proj.bias[i] = gate_up_proj_bias[2i], up_proj.bias[i] = [2i + 1] */
        return (tq_xw_part){I, 1, (uint64_t)(k == TQ_XW_UP_B), 2, 0};
    }
}

void tq_flash_xw_gather(const tq_xw_part *p, const void *src, size_t esz, void *out)
{
    const unsigned char *s = src;
    unsigned char *o = out;
    for (uint64_t r = 0; r < p->rows; r++)
        for (uint64_t c = 0; c < p->cols; c++, o += esz)
            memcpy(o, s + (p->first + r * p->rstep + c * p->cstride) * esz, esz);
}
