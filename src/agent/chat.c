#include "agent/chat.h"

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "util/buf.h"
#include "util/utf8.h"
#include "util/version.h"

struct chat_client {
	struct chat_config cfg;
	char *url;
	char *auth;		/* "Authorization: Bearer ..." or NULL */
};

int chat_new(const struct chat_config *cfg, struct chat_client **out)
{
	struct chat_client *c = calloc(1, sizeof(*c));
	size_t n;

	*out = NULL;
	if (!c)
		return -ENOMEM;
	c->cfg = *cfg;
	c->cfg.api_base = NULL;
	c->cfg.api_key = NULL;
	n = strlen(cfg->api_base);
	while (n && cfg->api_base[n - 1] == '/')
		n--;
	if (asprintf(&c->url, "%.*s/chat/completions", (int)n, cfg->api_base) < 0) {
		c->url = NULL;
		goto fail;
	}
	if (cfg->api_key && *cfg->api_key &&
	    asprintf(&c->auth, "Authorization: Bearer %s", cfg->api_key) < 0) {
		c->auth = NULL;
		goto fail;
	}
	*out = c;
	return 0;
fail:
	chat_free(c);
	return -ENOMEM;
}

void chat_free(struct chat_client *c)
{
	if (!c)
		return;
	free(c->url);
	if (c->auth) {
		explicit_bzero(c->auth, strlen(c->auth));
		free(c->auth);
	}
	free(c);
}

/* ---- one HTTP exchange ------------------------------------------------- */

struct exchange {
	struct buf body;
	bool too_large;
	char retry_after[64];
};

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
	struct exchange *x = ud;
	size_t len = size * n;

	if (x->body.len + len > CHAT_RESPONSE_MAX) {
		x->too_large = true;
		return 0;		/* abort the transfer */
	}
	return buf_append(&x->body, p, len) < 0 ? 0 : len;
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
	struct exchange *x = ud;
	size_t len = size * n, k = 12;

	if (len > k && !strncasecmp(p, "retry-after:", k)) {
		while (k < len && (p[k] == ' ' || p[k] == '\t'))
			k++;
		snprintf(x->retry_after, sizeof(x->retry_after), "%.*s",
			 (int)(len - k > 63 ? 63 : len - k), p + k);
		x->retry_after[strcspn(x->retry_after, "\r\n")] = '\0';
	}
	return len;
}

double chat_retry_after(const char *v, time_t now)
{
	char *end;
	double s;
	time_t t;

	if (!v || !*v)
		return -1;
	if (isdigit((unsigned char)*v)) {
		s = strtod(v, &end);
		while (*end == ' ')
			end++;
		return *end || !isfinite(s) ? -1 : s;
	}
	t = curl_getdate(v, &now);
	if (t < 0)
		return -1;
	return t > now ? (double)(t - now) : 0;
}

/* A readable line from an error body: the API's error.message when it
 * has one, else the start of the body, control characters removed. */
static void describe_body(const struct buf *b, char *out, size_t outlen)
{
	json_t *j = b->len ? json_loadb(b->data, b->len, 0, NULL) : NULL;
	const char *msg = NULL;
	struct buf clean = BUF_INIT;

	if (json_is_object(j)) {
		json_t *e = json_object_get(j, "error");

		msg = json_is_string(e) ? json_string_value(e) :
		      json_string_value(json_object_get(e, "message"));
		if (!msg)
			msg = json_string_value(json_object_get(j, "message"));
	}
	if (!msg)
		msg = b->data ? b->data : "";
	if (utf8_sanitize(&clean, msg, strlen(msg) > 300 ? utf8_cut(msg, 300) : strlen(msg)) == 0 &&
	    clean.data) {
		for (size_t i = 0; i < clean.len; i++)
			if ((unsigned char)clean.data[i] < 0x20 || clean.data[i] == 0x7f)
				clean.data[i] = ' ';
		snprintf(out, outlen, "%s", clean.data);
	} else {
		snprintf(out, outlen, "(no message)");
	}
	buf_release(&clean);
	json_decref(j);
}

static bool retryable(long status)
{
	return status == 429 || status == 500 || status == 502 || status == 503 ||
	       status == 504 || status == 529;
}

static void sleep_s(double s)
{
	struct timespec ts = { .tv_sec = (time_t)s,
			       .tv_nsec = (long)((s - (double)(time_t)s) * 1e9) };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int chat_complete(struct chat_client *c, json_t *request, json_t **response,
		  char *err, size_t errlen)
{
	char *body = json_dumps(request, JSON_COMPACT);
	struct curl_slist *headers = NULL;
	char why[512] = "", agent[128];
	int r = -EIO;

	*response = NULL;
	snprintf(agent, sizeof(agent), "petri/%s", petri_version());	/* curl copies it */
	if (!body)
		return -ENOMEM;
	headers = curl_slist_append(headers, "Content-Type: application/json");
	headers = curl_slist_append(headers, "Accept: application/json");
	if (c->auth)
		headers = curl_slist_append(headers, c->auth);
	for (unsigned attempt = 0;; attempt++) {
		struct exchange x = { .body = BUF_INIT };
		char curl_err[CURL_ERROR_SIZE] = "";
		CURL *h = curl_easy_init();
		double wait = -1;
		long status = 0;
		CURLcode cr;

		if (!h || !headers) {
			r = -ENOMEM;
			break;
		}
		curl_easy_setopt(h, CURLOPT_URL, c->url);
		curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
		curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
		curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
		curl_easy_setopt(h, CURLOPT_USERAGENT, agent);
		curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(c->cfg.timeout_s * 1000));
		curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 30000L);
		curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
		curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
		curl_easy_setopt(h, CURLOPT_WRITEDATA, &x);
		curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
		curl_easy_setopt(h, CURLOPT_HEADERDATA, &x);
		curl_easy_setopt(h, CURLOPT_ERRORBUFFER, curl_err);
		cr = curl_easy_perform(h);
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
		curl_easy_cleanup(h);

		if (x.too_large) {
			snprintf(err, errlen, "the response from %s is larger than %u MiB", c->url,
				 CHAT_RESPONSE_MAX >> 20);
			buf_release(&x.body);
			r = -EPROTO;
			break;
		}
		if (cr != CURLE_OK) {
			snprintf(why, sizeof(why), "%s: %s", c->url, curl_err[0] ? curl_err :
				 curl_easy_strerror(cr));
		} else if (status >= 200 && status < 300) {
			json_error_t jerr;
			json_t *j = json_loadb(x.body.data ? x.body.data : "", x.body.len, 0, &jerr);

			buf_release(&x.body);
			if (!json_is_object(j)) {
				snprintf(err, errlen, "the response from %s is not a JSON object%s%s",
					 c->url, j ? "" : ": ", j ? "" : jerr.text);
				json_decref(j);
				r = -EPROTO;
				break;
			}
			*response = j;
			r = 0;
			break;
		} else {
			char msg[400];

			describe_body(&x.body, msg, sizeof(msg));
			snprintf(why, sizeof(why), "HTTP %ld from %s: %s", status, c->url, msg);
			if (!retryable(status)) {
				snprintf(err, errlen, "%s", why);
				buf_release(&x.body);
				r = -EIO;
				break;
			}
			wait = chat_retry_after(x.retry_after, time(NULL));
		}
		buf_release(&x.body);
		if (attempt >= c->cfg.max_retries) {
			snprintf(err, errlen, "%s (gave up after %u attempt%s)", why, attempt + 1,
				 attempt ? "s" : "");
			r = -EIO;
			break;
		}
		if (wait < 0)
			wait = c->cfg.backoff_s * (double)(1u << (attempt < 10 ? attempt : 10));
		if (wait > c->cfg.max_wait_s)
			wait = c->cfg.max_wait_s;
		if (c->cfg.on_retry)
			c->cfg.on_retry(c->cfg.ctx, attempt + 1, wait, why);
		sleep_s(wait);
	}
	curl_slist_free_all(headers);
	free(body);
	return r;
}

/* ---- the reply --------------------------------------------------------- */

#define FAIL(...) do { snprintf(err, errlen, __VA_ARGS__); goto fail; } while (0)

/* A message's content: a string, null, or an array of text parts. */
static int take_content(const json_t *v, char **out, char *err, size_t errlen)
{
	struct buf b = BUF_INIT;
	size_t i;
	json_t *part;

	*out = NULL;
	if (!v || json_is_null(v))
		return 0;
	if (json_is_string(v)) {
		if (json_string_length(v) > CHAT_CONTENT_MAX)
			FAIL("the message's content is longer than %u bytes", CHAT_CONTENT_MAX);
		*out = strndup(json_string_value(v), json_string_length(v));
		return *out ? 0 : -ENOMEM;
	}
	if (!json_is_array(v) || json_array_size(v) > 256)
		FAIL("the message's content is neither a string, null, nor an array of parts");
	json_array_foreach(v, i, part) {
		json_t *t = json_object_get(part, "text");

		if (!json_is_string(t))
			continue;	/* images, refusals...: not text */
		if (b.len + json_string_length(t) > CHAT_CONTENT_MAX)
			FAIL("the message's content is longer than %u bytes", CHAT_CONTENT_MAX);
		if (buf_append(&b, json_string_value(t), json_string_length(t)) < 0)
			goto fail;
	}
	if (b.len)
		*out = buf_detach(&b, NULL);
	buf_release(&b);
	return 0;
fail:
	buf_release(&b);
	return -EPROTO;
}

static int take_call(const json_t *tc, size_t i, struct chat_tool_call *out, char *err,
		     size_t errlen)
{
	json_t *id = json_object_get(tc, "id"), *type = json_object_get(tc, "type");
	json_t *fn = json_object_get(tc, "function"), *name, *args;

	if (!json_is_object(tc) || !json_is_object(fn))
		FAIL("tool_calls[%zu] is not an object with a 'function' object", i);
	if (type && !json_is_null(type) &&
	    (!json_is_string(type) || strcmp(json_string_value(type), "function") != 0))
		FAIL("tool_calls[%zu].type is not \"function\"", i);
	name = json_object_get(fn, "name");
	args = json_object_get(fn, "arguments");
	if (!json_is_string(name) || json_string_length(name) == 0 ||
	    json_string_length(name) > CHAT_NAME_MAX)
		FAIL("tool_calls[%zu].function.name is not a string of 1 to %d bytes", i,
		     CHAT_NAME_MAX);
	if (id && !json_is_null(id) &&
	    (!json_is_string(id) || json_string_length(id) == 0 ||
	     json_string_length(id) > CHAT_ID_MAX))
		FAIL("tool_calls[%zu].id is not a string of 1 to %d bytes", i, CHAT_ID_MAX);
	/* Some servers (a model without an id, Ollama's objects) differ. */
	if (json_is_string(id))
		out->id = strdup(json_string_value(id));
	else if (asprintf(&out->id, "call_%zu", i + 1) < 0)
		out->id = NULL;
	out->name = strdup(json_string_value(name));
	if (json_is_string(args))
		out->arguments = strndup(json_string_value(args), json_string_length(args));
	else if (json_is_object(args))
		out->arguments = json_dumps(args, JSON_COMPACT);
	else if (!args || json_is_null(args))
		out->arguments = strdup("");
	else
		FAIL("tool_calls[%zu].function.arguments is neither a string nor an object", i);
	if (!out->id || !out->name || !out->arguments)
		return -ENOMEM;
	if (strlen(out->arguments) > CHAT_ARGS_MAX)
		FAIL("tool_calls[%zu].function.arguments is longer than %u bytes", i,
		     CHAT_ARGS_MAX);
	return 0;
fail:
	return -EPROTO;
}

int chat_parse_reply(const json_t *response, struct chat_reply *out, char *err, size_t errlen)
{
	json_t *choices = json_object_get(response, "choices"), *choice, *msg, *calls, *fr;
	json_t *usage = json_object_get(response, "usage"), *e = json_object_get(response, "error");
	size_t i;
	json_t *tc;
	int r;

	memset(out, 0, sizeof(*out));
	out->prompt_tokens = out->completion_tokens = -1;
	if (e && !json_is_null(e)) {
		const char *m = json_is_string(e) ? json_string_value(e) :
				json_string_value(json_object_get(e, "message"));

		FAIL("the API answered with an error: %.300s", m ? m : "(no message)");
	}
	if (!json_is_array(choices) || json_array_size(choices) == 0)
		FAIL("the response has no 'choices'");
	choice = json_array_get(choices, 0);
	msg = json_object_get(choice, "message");
	if (!json_is_object(msg))
		FAIL("choices[0] has no 'message' object");
	fr = json_object_get(choice, "finish_reason");
	if (json_is_string(fr))
		snprintf(out->finish_reason, sizeof(out->finish_reason), "%s", json_string_value(fr));
	if ((r = take_content(json_object_get(msg, "content"), &out->content, err, errlen)) < 0)
		goto fail_r;
	calls = json_object_get(msg, "tool_calls");
	if (calls && !json_is_null(calls)) {
		if (!json_is_array(calls))
			FAIL("message.tool_calls is not an array");
		if (json_array_size(calls) > CHAT_CALLS_MAX)
			FAIL("the model asked for %zu tool calls at once; at most %d are taken",
			     json_array_size(calls), CHAT_CALLS_MAX);
		out->calls = calloc(json_array_size(calls) + 1, sizeof(*out->calls));
		if (!out->calls) {
			r = -ENOMEM;
			goto fail_r;
		}
		json_array_foreach(calls, i, tc) {
			r = take_call(tc, i, &out->calls[i], err, errlen);
			out->ncalls = i + 1;
			if (r < 0)
				goto fail_r;
		}
	}
	if (json_is_object(usage)) {
		json_t *p = json_object_get(usage, "prompt_tokens");
		json_t *c = json_object_get(usage, "completion_tokens");

		if (json_is_integer(p))
			out->prompt_tokens = json_integer_value(p);
		if (json_is_integer(c))
			out->completion_tokens = json_integer_value(c);
	}
	return 0;
fail:
	r = -EPROTO;
fail_r:
	chat_reply_release(out);
	return r;
}

void chat_reply_release(struct chat_reply *r)
{
	for (size_t i = 0; i < r->ncalls; i++) {
		free(r->calls[i].id);
		free(r->calls[i].name);
		free(r->calls[i].arguments);
	}
	free(r->calls);
	free(r->content);
	memset(r, 0, sizeof(*r));
}
