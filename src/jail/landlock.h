/* landlock — one more filesystem layer where the kernel has Landlock:
 * after pivot_root the sandbox may read and execute the read-only tree,
 * write only /work, /tmp, /dev/shm and the device nodes, and (ABI >= 6)
 * may not signal processes outside its Landlock domain (pid 1). */
#ifndef PETRI_LANDLOCK_H
#define PETRI_LANDLOCK_H

/* The kernel's Landlock ABI version, or 0 when unavailable. */
int landlock_abi(void);

/* Restrict the calling thread (no_new_privs must be set).  Child side:
 * system calls only.  Returns 0, or -errno from the first failing call. */
int landlock_apply(int abi);

#endif
