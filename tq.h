/* tq.h — the one public header of libtq: #include <tq.h>, build with pkg-config --cflags tq.
 *
 * It includes every public header of the library. make install puts this file at
 * PREFIX/include/tq.h and the headers it includes under PREFIX/include/tq/, rewritten to
 * include each other as "tq/FOLDER/NAME.h" (the Makefile's headers rule), so that a user's
 * include path gains the one directory PREFIX/include and no generic names ("common/common.h").
 * Every declaration is inside extern "C" (TQ_BEGIN_DECLS), so C++ programs include it too.
 *
 * Version: TQ_VERSION ("0.1.0"), TQ_VERSION_MAJOR, TQ_VERSION_MINOR, TQ_VERSION_PATCH and
 * TQ_VERSION_NUMBER (MAJOR * 10000 + MINOR * 100 + PATCH), in common/common.h. The shared
 * library's soname carries the major version (libtq.so.0); it exports only the functions and
 * variables declared with TQ_API in these headers, all named tq_.
 *
 * Stability. While the major version is 0, the promise is per header, in three tiers; every
 * installed header is in exactly one (tests/cli/exports.sh checks):
 *
 *   stable: what a program that reads, checks and verifies model files uses. An incompatible
 *     change to these comes only with a new minor version and a line in its release notes:
 *       common/common.h     errors (tq_err, tq_fail, tq_exit_code), SHA-256, CRC-32, sizes,
 *                           UTF-8, whole-file reads, atomic output (tq_afile_, tq_adir_)
 *       formats/formats.h   dtypes and their conversions, safetensors reading and writing,
 *                           model directories (tq_model_), GGUF reading
 *       verify/verify.h     manifests, SHA256SUMS, check, compare, bundles, signatures
 *
 *   experimental: the pipelines and the decoder, one entry point each and its options and
 *     report structures, which follow the tools and may change in any release (structure
 *     layouts included):
 *       quant/convert/convert.h   tq_convert (tq-convert)
 *       layout/split/split.h      tq_split (tq-split)
 *       layout/rows/rows.h        tq_rows_ (tq-rowlayout)
 *       runtime/runtime.h         tq_run_, tq_runner_ (tq-run)
 *       tokenizer/tokenizer.h     tq_tok_, tq_chat_
 *
 *   internal: the tools' own machinery, installed and exported only because the experimental
 *     headers use their types or the tools share them; no promise at all, not meant for
 *     programs, and they may change or leave the installed set in any release:
 *       common/platform.h   the OS layer (tq_plat_): the only OS-specific calls
 *       formats/family.h    the family table (tq_family_): tensor names per model family
 *       formats/flash.h     the split layer files and split.json (split.h uses its types)
 *       quant/quant.h       the TurboQuant and MLX affine kernels (convert.h uses
 *                           tq_codebook); the row recipe tq-convert runs is not even here
 *                           (quant_internal.h)
 *
 * The conventions of every function (0 / -1 and a tq_err that names the file, tensor and
 * byte offset; nothing printed) are in common/common.h and README.md. */
#ifndef TQ_H
#define TQ_H

#include "common/common.h"
#include "common/platform.h"
#include "formats/formats.h"
#include "formats/family.h"
#include "formats/flash.h"
#include "quant/quant.h"
#include "quant/convert/convert.h"
#include "layout/split/split.h"
#include "layout/rows/rows.h"
#include "verify/verify.h"
#include "runtime/runtime.h"
#include "tokenizer/tokenizer.h"

#endif
