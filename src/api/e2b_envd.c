/* PLACEHOLDER — replaced by the envd implementation (e2b.h). */
#include "api/e2b.h"

enum MHD_Result e2b_envd(struct api_req *rq, struct session *s, const char *path)
{
	(void)s;
	return e2b_error(rq, 501, "envd %s is not implemented yet", path);
}
