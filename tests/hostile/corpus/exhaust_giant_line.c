// attack: one giant line: 128 MiB without a newline on stdout, then on stderr
// expect: both capped and marked truncated; no line-buffering blow-up in the supervisor
// status: ok
// truncated: stderr
// limits: timeout=30
#include <stdio.h>
#include <string.h>
#include <unistd.h>
static char buf[1 << 20];
int main(void)
{
	memset(buf, 'L', sizeof(buf));
	fprintf(stderr, "CONTAINED: writing a giant line\n");
	fflush(stderr);
	for (int i = 0; i < 128; i++)
		if (write(1, buf, sizeof(buf)) < 0)
			return 1;
	for (int i = 0; i < 128; i++)
		if (write(2, buf, sizeof(buf)) < 0)
			return 1;
	return 0;
}
