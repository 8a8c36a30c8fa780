/* The web page (docs/web.md): static files embedded in the binary
 * (src/web), served at / and /ui/, and plotly.js read from its Debian
 * package.  They hold no data, so they are served without an API key (the
 * page then asks for one); every byte the page shows it fetches from the
 * API with the key, under the API's own rules.
 *
 * What the page shows comes from sandboxes: the headers below are the
 * second wall behind the page's own care (it never parses untrusted text
 * as HTML).  The page's policy allows no inline script or style at all,
 * nothing from elsewhere, no framing of the page, no form submissions and
 * no <base>.
 *
 * Results that are HTML or a plotly figure are shown by two pages of their
 * own, each in an <iframe sandbox="allow-scripts"> without
 * allow-same-origin: an opaque origin, which cannot reach the page, its
 * storage or its key.  The page posts them what to show and they answer
 * only their height.  Each has a policy of its own that runs its own
 * scripts only (never an inline one), connects nowhere and lets only the
 * page frame it (docs/security.md, "The web page"). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/http.h"
#include "util/embed.h"

#define WEB_CSP "default-src 'none'; script-src 'self'; style-src 'self'; " \
		"img-src 'self' data:; connect-src 'self'; frame-src 'self'; " \
		"frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

/* plotly.js sets style attributes and inserts a stylesheet as it draws
 * (hence 'unsafe-inline' for styles, which run nothing), and builds some of
 * its own functions with new Function() as it loads (hence 'unsafe-eval':
 * Debian's plotly.js 1.31 does not start without it).  What that widens is a
 * bug of plotly.js, inside a frame that holds nothing, reaches nothing and
 * connects nowhere.  It needs no connection, frame, font or image from
 * anywhere. */
#define PLOTLY_CSP "default-src 'none'; script-src 'self' 'unsafe-eval'; " \
		  "style-src 'self' 'unsafe-inline'; " \
		  "img-src data: blob:; frame-ancestors 'self'; base-uri 'none'; " \
		  "form-action 'none'"

/* The HTML frame runs its one script, which puts the result's HTML in its
 * document so that it runs nothing (html-frame.js).  The policy holds on its
 * own, whatever that script does: no inline script, handler or eval; images
 * as data: only (pandas and matplotlib inline theirs); no style, which the
 * page's policy refused results before too; no request to anywhere, the
 * server included. */
#define HTML_CSP "default-src 'none'; script-src 'self'; img-src data:; " \
		 "frame-ancestors 'self'; base-uri 'none'; form-action 'none'"

/* plotly.js of r-cran-plotly, the only one Debian ships (a Recommends of
 * petri's package); the driver inlines the same file (driver.py,
 * PLOTLY_JS).  Missing, /ui/plotly.min.js is 404 and the frame says so. */
#define PLOTLY_JS "/usr/lib/R/site-library/plotly/htmlwidgets/lib/plotlyjs/plotly-latest.min.js"
#define PLOTLY_JS_MAX (16 << 20)

enum asset_kind {
	ASSET_PAGE,		/* a file of the page: the page's policy */
	ASSET_PLOTLY,		/* what the plotly frame loads: its policy */
	ASSET_HTML,		/* what the HTML result frame loads: its policy */
};

static const struct asset {
	const char *path;
	const char *type;
	const char *data, *end;	/* NULL: read from file */
	enum asset_kind kind;
	const char *file;
} assets[] = {
	{ "/", "text/html; charset=utf-8", petri_web_index_html, petri_web_index_html_end,
	  ASSET_PAGE, NULL },
	{ "/ui/app.js", "text/javascript; charset=utf-8", petri_web_app_js, petri_web_app_js_end,
	  ASSET_PAGE, NULL },
	{ "/ui/app.css", "text/css; charset=utf-8", petri_web_app_css, petri_web_app_css_end,
	  ASSET_PAGE, NULL },
	{ "/ui/plotly-frame.html", "text/html; charset=utf-8", petri_web_plotly_frame_html,
	  petri_web_plotly_frame_html_end, ASSET_PLOTLY, NULL },
	{ "/ui/plotly-frame.js", "text/javascript; charset=utf-8", petri_web_plotly_frame_js,
	  petri_web_plotly_frame_js_end, ASSET_PLOTLY, NULL },
	{ "/ui/plotly.min.js", "text/javascript; charset=utf-8", NULL, NULL, ASSET_PLOTLY, PLOTLY_JS },
	{ "/ui/html-frame.html", "text/html; charset=utf-8", petri_web_html_frame_html,
	  petri_web_html_frame_html_end, ASSET_HTML, NULL },
	{ "/ui/html-frame.js", "text/javascript; charset=utf-8", petri_web_html_frame_js,
	  petri_web_html_frame_js_end, ASSET_HTML, NULL },
};

bool web_is_asset(const char *url)
{
	for (size_t i = 0; i < sizeof(assets) / sizeof(assets[0]); i++)
		if (!strcmp(url, assets[i].path))
			return true;
	return false;
}

/* A response with the file's contents (sent from the page cache), or NULL
 * with errno when it cannot be read (ENOENT: the package is missing). */
static struct MHD_Response *file_response(const char *path)
{
	struct MHD_Response *resp;
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > PLOTLY_JS_MAX) {
		close(fd);
		errno = EINVAL;
		return NULL;
	}
	/* MHD owns fd from here, also when it fails. */
	resp = MHD_create_response_from_fd((size_t)st.st_size, fd);
	if (!resp)
		errno = ENOMEM;
	return resp;
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
	if (a->file) {
		resp = file_response(a->file);
		if (!resp && errno != ENOMEM)
			return http_error(rq, 404, "not_found", "%s is missing: install the "
					  "Debian package r-cran-plotly (%s)", rq->url, strerror(errno));
	} else {
		resp = MHD_create_response_from_buffer((size_t)(a->end - a->data), (void *)a->data,
						       MHD_RESPMEM_PERSISTENT);
	}
	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, "Content-Type", a->type);
	MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
	if (a->kind == ASSET_PAGE) {
		MHD_add_response_header(resp, "Content-Security-Policy", WEB_CSP);
		MHD_add_response_header(resp, "X-Frame-Options", "DENY");
		MHD_add_response_header(resp, "Cross-Origin-Opener-Policy", "same-origin");
		MHD_add_response_header(resp, "Cross-Origin-Resource-Policy", "same-origin");
	} else {
		/* A frame's origin is opaque: its own scripts are requests from
		 * another origin, which same-origin would refuse.  They hold no
		 * data; plotly.js is a public library. */
		MHD_add_response_header(resp, "Content-Security-Policy",
					a->kind == ASSET_PLOTLY ? PLOTLY_CSP : HTML_CSP);
		MHD_add_response_header(resp, "X-Frame-Options", "SAMEORIGIN");
		MHD_add_response_header(resp, "Cross-Origin-Resource-Policy", "cross-origin");
		MHD_add_response_header(resp, "Cache-Control", "max-age=3600");
	}
	return http_queue(rq, 200, resp);
}
