/* Numbers from text, strictly: config values, command-line flags, query
 * arguments.  The whole string must be the number, in [min, max]. */
#ifndef PETRI_NUM_H
#define PETRI_NUM_H

#include <stdbool.h>
#include <stdint.h>

/* A decimal integer; a sign is refused. */
bool num_u32(const char *s, uint32_t min, uint32_t max, uint32_t *out);
/* A finite number as strtod() reads it. */
bool num_double(const char *s, double min, double max, double *out);

/* And the other way, at compile time: a macro's numeric value as a string
 * literal, to splice into a message or an SQL text ("at most "
 * NUM_TEXT(MAX) " entries"). */
#define NUM_TEXT_(x) #x
#define NUM_TEXT(x) NUM_TEXT_(x)

#endif
