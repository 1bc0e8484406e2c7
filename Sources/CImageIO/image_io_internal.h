#ifndef UPDRAFT_IMAGE_IO_INTERNAL_H
#define UPDRAFT_IMAGE_IO_INTERNAL_H
// Helpers shared by image_io.c, png_io.c and jpeg_io.c. Not part of the module's interface.

#include "image_io.h"

struct libdeflate_decompressor;

/// Buffers of the per-thread scratch above this size are released after each borrowed decode.
#define UIMG_SCRATCH_RETAIN_BYTES ((size_t)8 << 20)

/// Writes a formatted message into `error` (when there is room) and returns `code`.
int uimg_fail(char *error, size_t capacity, int code, const char *format, ...)
    __attribute__((format(printf, 4, 5)));

/// Checks width, height and channels against the limits and computes width * height * channels
/// without overflow. Returns UIMG_OK, or UIMG_ERR_TOO_LARGE / UIMG_ERR_CORRUPT with a message.
int uimg_image_bytes(uint32_t width, uint32_t height, uint32_t channels, size_t *bytes,
                     char *error, size_t capacity);

/// Composites `count` pixels of `channels_with_alpha` (2 or 4) interleaved samples over black, in
/// place, leaving `channels_with_alpha - 1` samples per pixel at the start of the buffer.
void uimg_composite_over_black(uint8_t *pixels, size_t count, uint32_t channels_with_alpha);

/// Fills `out` with a decoded image of `format` and returns UIMG_OK: `pixels` (width * height *
/// `channels` samples, 1...4), any alpha (2 or 4 channels) composited over black in place first;
/// `had_alpha` as the file declared it, `orientation` the EXIF orientation already applied (1 if none).
int uimg_finish(uimg_image *out, uint8_t *pixels, uint32_t width, uint32_t height, uint32_t channels,
                int format, int had_alpha, int orientation);

/// A growable byte buffer for the encoders.
typedef struct {
    uint8_t *data;
    size_t size;
    size_t capacity;
} uimg_buffer;

/// Makes room for `extra` more bytes. Returns 0, or -1 when the allocation fails or would pass
/// UIMG_MAX_IMAGE_BYTES (the buffer is unchanged then).
int uimg_buffer_reserve(uimg_buffer *buffer, size_t extra);

/// The UIMG_ERR_UNSUPPORTED error for data that is neither PNG nor JPEG, naming what it looks like.
int uimg_unsupported_format(const uint8_t *data, size_t size, char *error, size_t capacity);

/// Opens `path` for reading if it is a regular file, without blocking on a FIFO or device. Returns the
/// descriptor and sets *size, or returns minus a UIMG_ERR_* code with the message written.
int uimg_open_regular(const char *path, uint64_t *size, char *error, size_t capacity);

/// Probes the header of an open regular file (read with pread, so the file offset is unchanged).
int uimg_probe_descriptor(int fd, uint64_t max_pixels, uimg_header *out, char *error, size_t capacity);

/// The codecs; `options` is never NULL and the header was already checked against the pixel cap.
/// The pixels are a new malloc'd buffer (libpng's and libjpeg's paths).
int uimg_decode_png(const uint8_t *data, size_t size, const uimg_decode_options *options, uimg_image *out,
                    char *error, size_t capacity);
int uimg_decode_jpeg(const uint8_t *data, size_t size, const uimg_decode_options *options, uimg_image *out,
                     char *error, size_t capacity);

/// A buffer of the per-thread scratch (decode_scratch.c).
typedef struct {
    uint8_t *data;
    size_t capacity;
} uimg_scratch_buffer;

/// What one thread reuses from one decode to the next (see decode_scratch.c).
typedef struct {
    uimg_scratch_buffer file;    // the file's bytes (uimg_decode_file_*)
    uimg_scratch_buffer idat;    // PNG fast path: the IDAT chunks' data, when there is more than one
    uimg_scratch_buffer raw;     // PNG fast path: the inflated, still filtered rows
    uimg_scratch_buffer pixels;  // a borrowed decode's pixels
    struct libdeflate_decompressor *inflater;
} uimg_scratch;

/// The calling thread's scratch (created on first use, released when the thread ends), or NULL when
/// it cannot be allocated.
uimg_scratch *uimg_thread_scratch(void);

/// Makes `buffer` hold at least `size` bytes (its contents are not kept); returns its data or NULL.
uint8_t *uimg_scratch_reserve(uimg_scratch_buffer *buffer, size_t size);

/// Releases the file, IDAT and raw buffers that grew past UIMG_SCRATCH_RETAIN_BYTES (not the pixels,
/// which a borrowed decode hands out). Called at the end of every decode.
void uimg_scratch_trim_work(uimg_scratch *scratch);

/// PNG fast path (png_fast.c): decodes 8-bit gray, gray+alpha, RGB and RGBA non-interlaced PNGs
/// without tRNS, every chunk CRC-checked. The pixels go into `scratch->pixels` when `borrow` is set,
/// else into a new malloc'd buffer. Returns UIMG_OK, UIMG_ERR_MEMORY (message written), or
/// UIMG_PNG_DEFER when the file is anything else (another layout, an unusual chunk, any damage):
/// libpng then decodes it or names what is wrong, so what is accepted and every error stay libpng's.
#define UIMG_PNG_DEFER UIMG_PNG_LEFT_TO_LIBPNG
int uimg_decode_png_fast(const uint8_t *data, size_t size, uimg_scratch *scratch, int borrow, uimg_image *out,
                         char *error, size_t capacity);

#endif
