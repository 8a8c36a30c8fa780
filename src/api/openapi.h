/* The OpenAPI 3.1 document of the API (docs/openapi.json, embedded). */
#ifndef PETRI_OPENAPI_H
#define PETRI_OPENAPI_H

#include <stddef.h>

#include "util/embed.h"

static inline const char *openapi_json(void) { return petri_openapi_json; }
static inline size_t openapi_json_len(void)
{
	return (size_t)(petri_openapi_json_end - petri_openapi_json);
}

#endif
