/* junit — test reports in JUnit XML (pytest --junitxml, node --test's junit
 * reporter, and most other runners), read as the untrusted input they are:
 * a sandbox wrote them.
 *
 * The XML is read by libxml2's SAX parser with handlers of our own, never
 * into a tree: what a report costs the daemon is its bytes (the caller
 * caps them at JUNIT_FILE_MAX) and the cases kept, whatever its shape.
 * Nothing is declared, resolved or loaded: a document type declaration ends
 * the parse (so no entity can be declared, expanded or fetched: no billion
 * laughs, no XXE), the only entities are XML's five predefined ones, there
 * is no network (XML_PARSE_NONET), no XInclude, and libxml2's messages go
 * to the caller's err, never to the daemon's stderr.  Elements nest at most
 * JUNIT_DEPTH_MAX deep and have at most JUNIT_ATTRS_MAX attributes, counted
 * before libxml2 reads the document (its check for duplicates costs the
 * square of their number: one tag of 180,000 attributes, 1.9 MB, was 13 s
 * of the daemon's CPU).
 *
 * A report is a root <testsuites> or <testsuite>; <testcase> elements
 * anywhere under it (nested suites, or node's cases right under the root)
 * are its cases.  A case is passed unless a child <failure> (failed),
 * <error> (error) or <skipped> (skipped) says otherwise; the first of
 * failure and error decides, and either overrides skipped.  Its message is
 * that element's message attribute (or the first line of its text), its
 * details the end of that text (a traceback), its output what
 * <system-out> and <system-err> hold.  Its file and line: for a case that
 * did not pass, where its failure's text points (pytest's "path.py:12:
 * AssertionError", a Python traceback's 'File "path.py", line 12', a
 * JavaScript stack's first frame outside node's own), preferring places in
 * /work; else the case's file and line attributes.  Paths under /work are
 * given relative to it.
 *
 * Every count counts every case; the cases kept are bounded in number and
 * in bytes, each string clipped (on a character boundary, marked with
 * "…"), failures and errors kept before passed and skipped cases when the
 * bound is reached.  Every string is valid UTF-8. */
#ifndef PETRI_JUNIT_H
#define PETRI_JUNIT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JUNIT_FILE_MAX		(4u << 20)	/* bytes of one report the caller reads */
#define JUNIT_FILES_MAX		8		/* reports looked for per execution */
#define JUNIT_BYTES_MAX		(8u << 20)	/* ... and read, all together: what
						 * parsing costs the daemon (at most
						 * about 0.25 s of CPU) */
#define JUNIT_DEPTH_MAX		64		/* elements nested in a report */
#define JUNIT_ATTRS_MAX		256		/* attributes (and namespaces) of
						 * one element: libxml2 checks each
						 * against those before it */
#define JUNIT_CASES_MAX		1000		/* cases kept, all reports together */
#define JUNIT_TEXT_MAX		(1u << 20)	/* bytes of their strings */
#define JUNIT_NAME_MAX		512		/* name, classname, file */
#define JUNIT_MESSAGE_MAX	2048		/* message, details, output, each */

/* The cases of one execution's reports.  Owns cases. */
struct junit {
	uint64_t passed, failed, errors, skipped;
	json_t *cases;		/* array of case objects, in the reports' order */
	size_t text;		/* bytes of the strings in cases */
	size_t kept_other;	/* passed and skipped cases among them */
	bool truncated;		/* some case was not kept */
};

/* 0 or -ENOMEM. */
int junit_init(struct junit *j);
void junit_release(struct junit *j);

/* Parse the report data[0, len) and add its cases to j: 0; -ENOMSG when
 * it is not a report (not XML, or its root element is not <testsuites> or
 * <testsuite>); -EINVAL when it is one but malformed or refused (too deep,
 * too many attributes, a DTD), with why in err; -ENOMEM.  On failure
 * nothing of it is added. */
int junit_parse(struct junit *j, const char *data, size_t len, char *err, size_t errlen);

/* Whether data[0, len), maybe the head of a longer file, starts as a
 * report does (its root element is <testsuites> or <testsuite>). */
bool junit_sniff(const char *data, size_t len);

/* {"passed", "failed", "errors", "skipped", "cases", "truncated"}, the
 * cases shared with j; NULL when out of memory. */
json_t *junit_to_json(const struct junit *j);

#endif
