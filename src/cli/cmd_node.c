/* petri drain, petri undrain, petri node — a node's administration from
 * its own shell (a Kubernetes preStop, an operator before maintenance):
 * the same as POST /v1/node/drain, /v1/node/undrain and GET /v1/node
 * (docs/cluster.md), sent to the petri serve the configuration names, with
 * an admin key.  Prints the node's state (JSON, as /healthz says it). */
#include <curl/curl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "util/buf.h"
#include "util/log.h"

#define NODE_ANSWER_MAX (64u << 10)
#define NODE_TIMEOUT_MS 30000L

static void usage(FILE *f, const char *name)
{
	fprintf(f,
		"usage: petri %s [--config FILE] [--url URL] [--key KEY]\n"
		"\n"
		"  --config FILE   the configuration of the petri serve to reach (its\n"
		"                  listen address and first [cluster] admin_keys)\n"
		"  --url URL       its base URL instead (http://HOST:PORT)\n"
		"  --key KEY       an admin key instead ($PETRI_ADMIN_KEY, else the\n"
		"                  configuration's first)\n", name);
}

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
	struct buf *b = arg;

	if (b->len + size * n > NODE_ANSWER_MAX || buf_append(b, p, size * n) < 0)
		return 0;
	return size * n;
}

/* The base URL of the configuration's listen address, reached from this
 * host: an address of every interface is reached on loopback. */
static void base_url(const struct petri_config *cfg, char *url, size_t len, const char **unix_path)
{
	const char *colon = strrchr(cfg->listen, ':');

	*unix_path = NULL;
	if (!strncmp(cfg->listen, "unix:", 5)) {
		*unix_path = cfg->listen + 5;
		snprintf(url, len, "http://localhost");
	} else if (!strncmp(cfg->listen, "0.0.0.0:", 8) && colon) {
		snprintf(url, len, "http://127.0.0.1%s", colon);
	} else if (!strncmp(cfg->listen, "[::]:", 5) && colon) {
		snprintf(url, len, "http://[::1]%s", colon);
	} else {
		snprintf(url, len, "http://%s", cfg->listen);
	}
}

static int node_command(int argc, char **argv, const char *method, const char *path)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "url", required_argument, NULL, 'u' },
		{ "key", required_argument, NULL, 'k' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *config_path = NULL, *url = NULL, *key = getenv("PETRI_ADMIN_KEY");
	const char *unix_path = NULL;
	char base[300], full[400], auth[1100], curl_err[CURL_ERROR_SIZE] = "";
	struct curl_slist *headers = NULL;
	struct buf body = BUF_INIT;
	struct cli_local l;
	long status = 0;
	CURLcode cr;
	CURL *h;
	int c;

	while ((c = getopt_long(argc, argv, "c:u:k:h", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			config_path = optarg;
			break;
		case 'u':
			url = optarg;
			break;
		case 'k':
			key = optarg;
			break;
		case 'h':
			usage(stdout, argv[0]);
			return 0;
		default:
			usage(stderr, argv[0]);
			return 2;
		}
	}
	if (optind != argc) {
		usage(stderr, argv[0]);
		return 2;
	}
	cli_local_config(&l, config_path);
	if (!key && l.cfg.nadmin_keys)
		key = l.cfg.admin_keys[0];
	if (url)
		snprintf(base, sizeof(base), "%s", url);
	else
		base_url(&l.cfg, base, sizeof(base), &unix_path);
	/* "http://host:8080/" and "http://host:8080" are one base. */
	if (snprintf(full, sizeof(full), "%.*s%s",
		     (int)(strlen(base) - (base[0] && base[strlen(base) - 1] == '/')), base,
		     path) >= (int)sizeof(full) || (key && strlen(key) > 1000)) {
		config_release(&l.cfg);
		die(2, "the URL or the key is too long");
	}
	if (key) {
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s", key);
		headers = curl_slist_append(headers, auth);
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);
	if (!(h = curl_easy_init()))
		die(1, "out of memory");
	curl_easy_setopt(h, CURLOPT_URL, full);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	if (!strcmp(method, "POST"))
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
	if (unix_path)
		curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, unix_path);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, NODE_TIMEOUT_MS);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, curl_err);
	cr = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(h);
	curl_slist_free_all(headers);
	curl_global_cleanup();
	config_release(&l.cfg);
	if (cr != CURLE_OK) {
		buf_release(&body);
		die(1, "%s: %s", full, curl_err[0] ? curl_err : curl_easy_strerror(cr));
	}
	fwrite(body.data ? body.data : "", 1, body.len, status == 200 ? stdout : stderr);
	fputc('\n', status == 200 ? stdout : stderr);
	buf_release(&body);
	return status == 200 ? 0 : 1;
}

int cmd_drain(int argc, char **argv)
{
	return node_command(argc, argv, "POST", "/v1/node/drain");
}

int cmd_undrain(int argc, char **argv)
{
	return node_command(argc, argv, "POST", "/v1/node/undrain");
}

int cmd_node(int argc, char **argv)
{
	return node_command(argc, argv, "GET", "/v1/node");
}
