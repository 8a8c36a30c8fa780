/* The long-string path of frames (runtime/jstring.c, frame.c's
 * lifted_load) against jansson itself: for any body, lifted_load must give
 * the tree json_loadb gives, or fail where it fails.  The only difference
 * allowed is frame.c's own rule that no key is longer than FRAME_KEY_MAX.
 *
 * frame.c is included, as fuzz_frame.c includes box.c, so that the static
 * functions tested are the ones the server runs.  FRAME_LIFT_MIN is the
 * server's: seeds and the dictionary carry strings longer than it. */
#include "runtime/frame.c"

#include <assert.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct jsoncost_limits cost = { FRAME_NODES_MAX, FRAME_DEPTH_MAX };
	const char *body = (const char *)data, *why;
	struct frame_reader fr;
	json_t *ours, *theirs;
	bool long_key;

	if (!jsoncost_within(body, size, &cost, NULL))
		return 0;	/* refused before either parser runs */
	frame_reader_init(&fr);
	ours = lifted_load(&fr, body, size, &why);
	theirs = json_loadb(body, size, JSON_REJECT_DUPLICATES, NULL);
	long_key = !ours && strstr(why, "key longer");
	if (!long_key)
		assert(ours ? theirs && json_equal(ours, theirs) : !theirs);
	json_decref(ours);
	json_decref(theirs);
	frame_reader_release(&fr);
	return 0;
}
