/* verify/verify.h — manifests, bit-exact comparison, golden decodes, bundles. */
#ifndef TQ_VERIFY_H
#define TQ_VERIFY_H

#include "common/common.h"

#endif
