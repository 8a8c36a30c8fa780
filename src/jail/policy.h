/* policy — the sandbox's seccomp-bpf filter: an allow-list.
 *
 * Built once per process with libseccomp, exported to raw BPF behind a
 * prologue of our own (architecture must be x86_64; x32 system call numbers
 * kill the process), then loaded in the child with one system call.
 * Unknown system calls fail with ENOSYS (so libraries fall back, as glibc
 * does from clone3 to clone); the dangerous ones we name fail with EPERM. */
#ifndef PETRI_POLICY_H
#define PETRI_POLICY_H

#include <linux/filter.h>
#include <stddef.h>

struct policy {
	struct sock_fprog prog;		/* owns prog.filter */
	unsigned allowed;		/* system calls on the allow-list */
};

/* Build the filter.  0 or -errno, with a message in err. */
int policy_build(struct policy *pol, char *err, size_t errlen);
/* A filter for one of petri's own helper processes (archive.h's writer):
 * the calls in names (NULL-terminated; names this kernel's libseccomp does
 * not know are skipped), and mmap and mprotect without PROT_EXEC; every
 * other call fails with ENOSYS, and only the x86_64 ABI runs (as above,
 * without the sandbox's argument checks).  In a sanitized build (tests
 * only), also sigaltstack, which the sanitizer's runtime calls before every
 * call that does not return.  0 or -errno, with a message. */
int policy_build_only(struct policy *pol, const char *const *names, char *err, size_t errlen);
void policy_release(struct policy *pol);

/* Load it into the calling thread (sets no_new_privs first).  Child side:
 * system calls only.  0 or -errno. */
int policy_load(const struct policy *pol);

/* The allow-list, NULL-terminated (names as libseccomp spells them). */
const char *const *policy_allowed_names(size_t *count);
/* The names answered with EPERM. */
const char *const *policy_denied_names(size_t *count);

#endif
