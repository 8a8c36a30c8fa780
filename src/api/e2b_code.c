/* PLACEHOLDER — replaced by the code interpreter implementation (e2b.h). */
#include "api/e2b.h"

enum MHD_Result e2b_code(struct api_req *rq, struct session *s, const char *path)
{
	(void)s;
	return e2b_error(rq, 501, "code interpreter %s is not implemented yet", path);
}
