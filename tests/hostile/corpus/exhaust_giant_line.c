// attack: one giant line: 128 MiB without a newline on stdout, then on stderr
// expect: stdout capped and marked truncated; past the cap and 4 MiB more the writer blocks and is interrupted (a one-shot killed), with the output limit as the reason; no line-buffering blow-up in the supervisor
// status: timeout
// truncated: stdout
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
