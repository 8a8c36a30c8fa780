#include "unit.h"
Suite *cgroup_suite(void) { return suite_create("cgroup"); }
