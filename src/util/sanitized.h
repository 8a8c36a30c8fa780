/* sanitized — whether this is a sanitizer build (ASan, UBSan with ASan,
 * TSan: the test builds, never a release), for the few places that must
 * make room for the sanitizer's runtime. */
#ifndef PETRI_SANITIZED_H
#define PETRI_SANITIZED_H

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED_BUILD 1
#endif
#endif
#ifndef SANITIZED_BUILD
#define SANITIZED_BUILD 0
#endif

#endif
