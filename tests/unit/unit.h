/* C unit tests (libcheck).  Each tests/unit/test_<module>.c defines one
 * suite constructor, listed here and in main.c.  tests/unit/session/ is a
 * binary of its own: its fake sandbox replaces code this one links. */
#ifndef PETRI_UNIT_H
#define PETRI_UNIT_H

#include <check.h>

Suite *agent_suite(void);
Suite *buf_suite(void);
Suite *cache_suite(void);
Suite *cgroup_suite(void);
Suite *codec_suite(void);
Suite *config_suite(void);
Suite *export_suite(void);
Suite *files_suite(void);
Suite *junit_suite(void);
Suite *languages_suite(void);
Suite *lease_suite(void);
Suite *mcp_suite(void);
Suite *mounts_suite(void);
Suite *multipart_suite(void);
Suite *netpolicy_suite(void);
Suite *policy_suite(void);
Suite *poolrate_suite(void);
Suite *procs_suite(void);
Suite *record_suite(void);
Suite *request_suite(void);
Suite *share_suite(void);
Suite *tables_suite(void);
Suite *util_suite(void);
Suite *workq_suite(void);
Suite *ws_suite(void);

#endif
