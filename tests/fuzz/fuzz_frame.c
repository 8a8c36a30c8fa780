/* Frames from a sandbox (docs/protocol.md): the byte stream a hostile driver
 * writes to its control socket, through frame_reader and then box.c's
 * validation of each frame (take_frame: result, error, done, and the
 * keeper's died and ready, which change what the reader expects).
 *
 * take_frame() and its helpers are static in box.c; the file is included
 * rather than copied or exposed, so this tests the code the server runs.
 * The input is fed twice, whole and in small chunks: a reader must cut the
 * same frames whatever the socket's read sizes. */
#include "runtime/box.c"

#include <assert.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Read the stream in chunks of step bytes; the frames, dumped, go to log. */
static int read_all(const uint8_t *data, size_t size, size_t step, struct run *run,
		    struct buf *log)
{
	/* Execution 7 in flight, with the budget box.c gives it. */
	struct frame_expect ex = {
		.id = 7, .bytes = 4096 + FRAME_NOTE_MAX + 4 + FRAME_ERROR_MAX + 4 + FRAME_DONE_MAX,
		.frames = RESULTS_MAX + 3,
	};
	struct frame_reader *fr = &run->b->fr;
	json_t *f;
	int r = 0;

	frame_reader_init(fr);
	frame_reader_expect(fr, &ex);
	for (size_t off = 0; off < size && r >= 0; off += step) {
		r = frame_reader_feed(fr, data + off, size - off < step ? size - off : step);
		assert(r == 0);
		while ((r = frame_reader_next(fr, &f)) > 0) {
			char *s = json_dumps(f, JSON_COMPACT | JSON_SORT_KEYS);

			assert(s && json_is_string(json_object_get(f, "type")));
			buf_append_str(log, s);
			free(s);
			take_frame(run, f);
			json_decref(f);
		}
	}
	assert(r < 0 || !fr->error[0]);
	assert(fr->expect.bytes <= ex.bytes && fr->expect.frames <= ex.frames);
	frame_reader_release(fr);
	return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct exec_request ex = { .language = "python", .code = "", .cancel_fd = -1 };
	struct result res, res2;
	/* Boxes without a sandbox: the reader and what "ready" notes. */
	static struct box b, b2;
	struct run run = { .b = &b, .ex = &ex, .res = &res, .id = 7, .results_cap = 4096 };
	struct run run2 = { .b = &b2, .ex = &ex, .res = &res2, .id = 7, .results_cap = 4096 };
	struct buf whole = BUF_INIT, chunked = BUF_INIT;
	int r1, r2;
	json_t *j;

	if (result_init(&res) < 0)
		return 0;
	if (result_init(&res2) < 0) {
		result_release(&res);
		return 0;
	}
	r1 = read_all(data, size, size ? size : 1, &run, &whole);
	r2 = read_all(data, size, 1 + size % 7, &run2, &chunked);
	assert(r1 == r2 && whole.len == chunked.len &&
	       (!whole.len || !memcmp(whole.data, chunked.data, whole.len)));
	/* What the validation kept stays within its bounds and serializes. */
	assert(res.results_bytes <= run.results_cap);
	if (res.error) {
		assert(json_string_length(json_object_get(res.error, "name")) <= NAME_MAX_LEN);
		assert(json_string_length(json_object_get(res.error, "message")) <= MESSAGE_MAX_LEN);
	}
	j = result_to_json(&res);
	assert(j);
	free(json_dumps(j, JSON_COMPACT));
	json_decref(j);
	buf_release(&whole);
	buf_release(&chunked);
	result_release(&res);
	result_release(&res2);
	return 0;
}
