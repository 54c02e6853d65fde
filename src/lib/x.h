#include "lib/y.h"
