/* The web page (docs/web.md): three static files embedded in the binary
 * (src/web), served at / and /ui/.  They hold no data, so they are served
 * without an API key (the page then asks for one); every byte the page
 * shows it fetches from the API with the key, under the API's own rules.
 *
 * What the page shows comes from sandboxes: the headers below are the
 * second wall behind the page's own care (it never parses untrusted text
 * as HTML outside a sandboxed iframe).  The policy allows no inline script
 * or style at all, nothing from elsewhere, no framing of the page, no form
 * submissions and no <base>; a srcdoc iframe inherits it, so sandbox HTML
 * can run no script even if the iframe's sandbox were lifted. */
#include <string.h>

#include "api/http.h"
#include "runtime/embed.h"

#define WEB_CSP "default-src 'none'; script-src 'self'; style-src 'self'; " \
		"img-src 'self' data:; connect-src 'self'; frame-src 'self'; " \
		"frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

static const struct asset {
	const char *path;
	const char *type;
	const char *data, *end;
} assets[] = {
	{ "/", "text/html; charset=utf-8", petri_web_index_html, petri_web_index_html_end },
	{ "/ui/app.js", "text/javascript; charset=utf-8", petri_web_app_js, petri_web_app_js_end },
	{ "/ui/app.css", "text/css; charset=utf-8", petri_web_app_css, petri_web_app_css_end },
};

bool web_is_asset(const char *url)
{
	for (size_t i = 0; i < sizeof(assets) / sizeof(assets[0]); i++)
		if (!strcmp(url, assets[i].path))
			return true;
	return false;
}

enum MHD_Result handle_web(struct api_req *rq)
{
	const struct asset *a = NULL;
	struct MHD_Response *resp;

	for (size_t i = 0; i < sizeof(assets) / sizeof(assets[0]) && !a; i++)
		if (!strcmp(rq->url, assets[i].path))
			a = &assets[i];
	if (!a)
		return http_error(rq, 404, "not_found", "no such endpoint: %.200s", rq->url);
	if (strcmp(rq->method, "GET") && strcmp(rq->method, "HEAD"))
		return http_not_allowed(rq, "GET, HEAD");
	resp = MHD_create_response_from_buffer((size_t)(a->end - a->data), (void *)a->data,
					       MHD_RESPMEM_PERSISTENT);
	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, "Content-Type", a->type);
	MHD_add_response_header(resp, "Content-Security-Policy", WEB_CSP);
	MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
	MHD_add_response_header(resp, "X-Frame-Options", "DENY");
	MHD_add_response_header(resp, "Cross-Origin-Opener-Policy", "same-origin");
	MHD_add_response_header(resp, "Cross-Origin-Resource-Policy", "same-origin");
	return http_queue(rq, 200, resp);
}
