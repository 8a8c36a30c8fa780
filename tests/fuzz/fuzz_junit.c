/* A test report a sandbox wrote: junit_parse (src/exec/junit.c) on any
 * bytes, then the result's "tests" as MCP renders it for a model.
 *
 * Oracle: a report is refused with a reason, or taken with every bound
 * held (cases kept, bytes of their strings, each string's length, valid
 * UTF-8); a report taken is one junit_sniff recognizes; the rendered text
 * is valid UTF-8. */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mcp/render.h"
#include "exec/junit.h"
#include "exec/result.h"
#include "util/utf8.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const struct junit *j)
{
	size_t i, text = 0, other = 0;
	const char *k;
	json_t *c, *v;

	assert(json_array_size(j->cases) <= JUNIT_CASES_MAX);
	assert(json_array_size(j->cases) <= j->passed + j->failed + j->errors + j->skipped);
	json_array_foreach(j->cases, i, c) {
		const char *status = json_string_value(json_object_get(c, "status"));

		assert(status);
		other += !strcmp(status, "passed") || !strcmp(status, "skipped");
		json_object_foreach(c, k, v) {
			if (!json_is_string(v))
				continue;
			assert(json_string_length(v) <= JUNIT_MESSAGE_MAX);
			assert(utf8_valid(json_string_value(v), json_string_length(v)));
			text += json_string_length(v);
		}
		assert(json_is_null(json_object_get(c, "line")) ||
		       json_integer_value(json_object_get(c, "line")) > 0);
	}
	assert(text == j->text && text <= JUNIT_TEXT_MAX);
	assert(other == j->kept_other);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *xml = (const char *)data;
	struct junit j;
	struct result res;
	char err[256];
	bool is_error;
	json_t *content;
	int r;

	if (junit_init(&j) < 0)
		return 0;
	r = junit_parse(&j, xml, size, err, sizeof(err));
	assert(r == 0 || r == -ENOMSG || r == -EINVAL || r == -ENOMEM);
	assert(r == 0 || (err[0] && utf8_valid(err, strlen(err))));
	assert(r != 0 || junit_sniff(xml, size));
	if (r == 0)	/* the same report twice: the merge keeps the bounds */
		assert(junit_parse(&j, xml, size, err, sizeof(err)) == 0);
	check(&j);

	if (result_init(&res) == 0) {
		res.tests = junit_to_json(&j);
		assert(res.tests);
		content = render_execution(&res, &is_error);
		if (content) {
			const char *text = json_string_value(
				json_object_get(json_array_get(content, 0), "text"));

			assert(text && utf8_valid(text, strlen(text)));
			json_decref(content);
		}
		result_release(&res);
	}
	junit_release(&j);
	return 0;
}
