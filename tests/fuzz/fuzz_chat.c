/* A model API's reply, which petri ask does not trust: chat_parse_reply
 * (src/agent/chat.c) on any JSON, and Retry-After values.
 *
 * Oracle: a reply is either refused with a reason, or taken with every
 * bound held (number of calls, lengths of ids, names, arguments, content). */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/chat.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *j = json_loadb((const char *)data, size, 0, NULL);
	struct chat_reply r;
	char err[256] = "", value[64];
	int rc;

	if (size < sizeof(value)) {
		memcpy(value, data, size);
		value[size] = '\0';
		(void)chat_retry_after(value, 1700000000);
	}
	if (!j)
		return 0;
	rc = chat_parse_reply(j, &r, err, sizeof(err));
	if (rc < 0) {
		assert(rc == -EPROTO || rc == -ENOMEM);
		assert(rc == -ENOMEM || err[0]);
	} else {
		assert(r.ncalls <= CHAT_CALLS_MAX);
		assert(!r.content || strlen(r.content) <= CHAT_CONTENT_MAX);
		for (size_t i = 0; i < r.ncalls; i++) {
			assert(r.calls[i].id && strlen(r.calls[i].id) <= CHAT_ID_MAX);
			assert(r.calls[i].name && *r.calls[i].name &&
			       strlen(r.calls[i].name) <= CHAT_NAME_MAX);
			assert(r.calls[i].arguments && strlen(r.calls[i].arguments) <= CHAT_ARGS_MAX);
		}
		chat_reply_release(&r);
	}
	json_decref(j);
	return 0;
}
