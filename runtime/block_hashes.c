/* --check-blocks: expected SHA-256 of every expert block, from split.json. */
#include "runtime/rt_internal.h"

int rt_load_block_hashes(tq_runner *r, tq_err *e)
{
    /* split.json's loader (layout/) has not landed yet */
    return tq_fail(e, TQ_EUNSUP, "%s: --check-blocks is not available in this build", r->dir);
}
