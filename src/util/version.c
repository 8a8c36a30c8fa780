/* The version string, from the header the Makefile writes into the build
 * directory ($(BUILD)/version-string.h, rewritten only when scripts/version
 * prints something new). */
#include "util/version.h"

#include "version-string.h"

const char *petri_version(void)
{
	return PETRI_VERSION;
}
