#include "lib/x.h"
