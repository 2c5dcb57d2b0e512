#include "internal.h"

unsigned qattn_version_number(void) { return QATTN_VERSION_NUMBER; }
const char *qattn_version_string(void) { return QATTN_VERSION_STRING; }
