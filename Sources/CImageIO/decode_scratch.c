// Per-thread buffers reused from one decode to the next, so decoding a stream of images of similar
// size allocates nothing after the first: the file's bytes, the PNG fast path's concatenated IDAT data
// and inflated rows, and the decoded pixels a borrowed decode returns. A buffer grows to the largest
// request seen; one above UIMG_SCRATCH_RETAIN_BYTES is released by uimg_scratch_trim (and when the
// thread ends), so a thread never keeps more than 4 * UIMG_SCRATCH_RETAIN_BYTES between decodes.

#include "image_io_internal.h"

#include <libdeflate.h>
#include <pthread.h>
#include <stdlib.h>

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static int scratch_key_ok = 0;

static void free_buffer(uimg_scratch_buffer *buffer) {
    free(buffer->data);
    buffer->data = NULL;
    buffer->capacity = 0;
}

static void destroy_scratch(void *pointer) {
    uimg_scratch *scratch = pointer;
    if (scratch == NULL) return;
    free_buffer(&scratch->file);
    free_buffer(&scratch->idat);
    free_buffer(&scratch->raw);
    free_buffer(&scratch->pixels);
    if (scratch->inflater != NULL) libdeflate_free_decompressor(scratch->inflater);
    free(scratch);
}

static void make_key(void) { scratch_key_ok = pthread_key_create(&scratch_key, destroy_scratch) == 0; }

/// This thread's scratch if it has one (NULL otherwise, or when thread-local storage is unavailable).
static uimg_scratch *existing_scratch(void) {
    pthread_once(&scratch_once, make_key);
    return scratch_key_ok ? pthread_getspecific(scratch_key) : NULL;
}

uimg_scratch *uimg_thread_scratch(void) {
    uimg_scratch *scratch = existing_scratch();
    if (scratch != NULL || !scratch_key_ok) return scratch;
    scratch = calloc(1, sizeof *scratch);
    if (scratch == NULL) return NULL;
    if (pthread_setspecific(scratch_key, scratch) != 0) {
        free(scratch);
        return NULL;
    }
    return scratch;
}

uint8_t *uimg_scratch_reserve(uimg_scratch_buffer *buffer, size_t size) {
    if (size <= buffer->capacity) return buffer->data;
    // Grow a little beyond the request, so images a few rows taller do not reallocate each time.
    size_t capacity = size + size / 8;
    if (capacity < size) capacity = size;
    free(buffer->data);  // the old contents are not needed: callers fill the buffer afresh
    buffer->data = malloc(capacity);
    buffer->capacity = buffer->data == NULL ? 0 : capacity;
    return buffer->data;
}

static void trim_buffer(uimg_scratch_buffer *buffer) {
    if (buffer->capacity > UIMG_SCRATCH_RETAIN_BYTES) free_buffer(buffer);
}

void uimg_scratch_trim_work(uimg_scratch *scratch) {
    trim_buffer(&scratch->file);
    trim_buffer(&scratch->idat);
    trim_buffer(&scratch->raw);
}

void uimg_scratch_trim(void) {
    uimg_scratch *scratch = existing_scratch();
    if (scratch == NULL) return;
    uimg_scratch_trim_work(scratch);
    trim_buffer(&scratch->pixels);
}

void uimg_scratch_release(void) {
    uimg_scratch *scratch = existing_scratch();
    if (scratch == NULL) return;
    pthread_setspecific(scratch_key, NULL);
    destroy_scratch(scratch);
}

size_t uimg_scratch_bytes(void) {
    pthread_once(&scratch_once, make_key);
    if (!scratch_key_ok) return 0;
    const uimg_scratch *scratch = pthread_getspecific(scratch_key);
    if (scratch == NULL) return 0;
    return scratch->file.capacity + scratch->idat.capacity + scratch->raw.capacity + scratch->pixels.capacity;
}
