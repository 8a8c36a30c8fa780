/* chat — a client of OpenAI-compatible Chat Completions APIs with tool
 * calling (hosted APIs, llama.cpp's server, Ollama, vLLM), over libcurl.
 *
 * chat_complete() POSTs a request to {api_base}/chat/completions and
 * retries what is worth retrying: connection failures, 429 (honouring
 * Retry-After), 500, 502, 503, 504, 529, with exponential backoff.  Other
 * statuses fail at once with the API's own message.
 *
 * Everything the API sends back is untrusted: the body is bounded
 * (CHAT_RESPONSE_MAX), and chat_parse_reply() checks every member it
 * uses, with bounds on counts and lengths, before anything acts on it.
 *
 * libcurl must be initialized (curl_global_init) by the program. */
#ifndef PETRI_AGENT_CHAT_H
#define PETRI_AGENT_CHAT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#define CHAT_RESPONSE_MAX	(16u << 20)	/* bytes of a response body */
#define CHAT_CONTENT_MAX	(1u << 20)	/* bytes of a message's text */
#define CHAT_CALLS_MAX		32		/* tool calls in one reply */
#define CHAT_ID_MAX		256
#define CHAT_NAME_MAX		128
#define CHAT_ARGS_MAX		(2u << 20)	/* bytes of a call's arguments */

struct chat_client;

struct chat_config {
	const char *api_base;		/* "https://host/v1" (copied) */
	const char *api_key;		/* NULL or "": no Authorization (copied) */
	double timeout_s;		/* one HTTP request */
	unsigned max_retries;		/* after the first attempt */
	double backoff_s;		/* first wait; doubles each retry */
	double max_wait_s;		/* the longest wait, even if Retry-After asks more */
	/* Told before each wait (may be NULL). */
	void (*on_retry)(void *ctx, unsigned attempt, double wait_s, const char *why);
	void *ctx;
};

int chat_new(const struct chat_config *cfg, struct chat_client **out);
void chat_free(struct chat_client *c);

/* POST request (not consumed); *response gets the parsed JSON object of a
 * 2xx answer.  0, or -EIO (HTTP or transport failure, retries spent),
 * -EPROTO (the answer is not a JSON object), -ENOMEM, with err. */
int chat_complete(struct chat_client *c, json_t *request, json_t **response,
		  char *err, size_t errlen);

struct chat_tool_call {
	char *id;
	char *name;
	char *arguments;	/* the raw text the model wrote: maybe not JSON */
};

struct chat_reply {
	char *content;		/* NULL: none */
	struct chat_tool_call *calls;
	size_t ncalls;
	char finish_reason[32];
	long long prompt_tokens, completion_tokens;	/* -1: not reported */
};

/* Validate a response and take the first choice's message out of it.
 * 0, or -EPROTO with err saying what is wrong. */
int chat_parse_reply(const json_t *response, struct chat_reply *out, char *err, size_t errlen);
void chat_reply_release(struct chat_reply *r);

/* Seconds a Retry-After value asks for (delta-seconds or an HTTP date,
 * relative to now), or -1 when it is not valid. */
double chat_retry_after(const char *value, time_t now);

#endif
