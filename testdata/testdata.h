/* testdata/testdata.h — deterministic synthetic models (tq-mkmodel). */
#ifndef TQ_TESTDATA_H
#define TQ_TESTDATA_H

#include "common/common.h"

#endif
