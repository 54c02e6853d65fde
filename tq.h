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
 * Stability. While the major version is 0, the promise is per part:
 *
 *   stable: what a program that reads, checks and verifies model files uses. An incompatible
 *     change to these comes only with a new minor version and a line in its release notes:
 *       common/common.h     errors (tq_err, tq_fail, tq_exit_code), SHA-256, CRC-32, sizes,
 *                           UTF-8, whole-file reads, atomic output (tq_afile_, tq_adir_)
 *       formats/formats.h   dtypes and their conversions, safetensors reading and writing,
 *                           model directories (tq_model_), GGUF reading
 *       verify/verify.h     manifests, SHA256SUMS, check, compare, bundles, signatures
 *
 *   experimental: the pipelines and the decoder, whose options and report structures follow
 *     the tools and may change in any release (structure layouts included):
 *       formats/family.h, formats/flash.h, quant/quant.h, quant/convert/convert.h,
 *       layout/split/split.h, layout/rows/rows.h, runtime/runtime.h, tokenizer/tokenizer.h
 *
 * The conventions of every function (0 / -1 and a tq_err that names the file, tensor and
 * byte offset; nothing printed) are in common/common.h and README.md. */
#ifndef TQ_H
#define TQ_H

#include "common/common.h"
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
