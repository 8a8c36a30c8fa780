/* Runs every unit suite.  The summary line ("100%: Checks: N, Failures: 0,
 * Errors: 0") is what CI reads; a TAP log is written where PETRI_UNIT_TAP
 * names a file.  Tests fork (CK_FORK) so one crash fails one test. */
#include <stdlib.h>

#include "unit.h"

int main(void)
{
	Suite *(*const suites[])(void) = {
		agent_suite,
		buf_suite,
		cache_suite,
		cgroup_suite,
		codec_suite,
		config_suite,
		export_suite,
		files_suite,
		junit_suite,
		languages_suite,
		lease_suite,
		mcp_suite,
		mounts_suite,
		multipart_suite,
		netpolicy_suite,
		policy_suite,
		poolrate_suite,
		procs_suite,
		record_suite,
		request_suite,
		share_suite,
		tables_suite,
		util_suite,
		workq_suite,
		ws_suite,
	};
	SRunner *sr = srunner_create(NULL);
	const char *tap = getenv("PETRI_UNIT_TAP");
	int failed;

	for (size_t i = 0; i < sizeof(suites) / sizeof(suites[0]); i++)
		srunner_add_suite(sr, suites[i]());
	if (tap)
		srunner_set_tap(sr, tap);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
