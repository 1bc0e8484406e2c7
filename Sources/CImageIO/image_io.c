// Format detection, file reading and the helpers both codecs share. The codecs live in png_io.c and
// jpeg_io.c; each contains its library's setjmp/longjmp error handling.

#include "image_io_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int uimg_fail(char *error, size_t capacity, int code, const char *format, ...) {
    if (error != NULL && capacity > 0) {
        va_list args;
        va_start(args, format);
        vsnprintf(error, capacity, format, args);
        va_end(args);
    }
    return code;
}

int uimg_image_bytes(uint32_t width, uint32_t height, uint32_t channels, size_t *bytes,
                     char *error, size_t capacity) {
    if (width == 0 || height == 0 || channels == 0) {
        return uimg_fail(error, capacity, UIMG_ERR_CORRUPT, "image has no pixels (%ux%u, %u channels)",
                         width, height, channels);
    }
    if (width > UIMG_MAX_DIMENSION || height > UIMG_MAX_DIMENSION) {
        return uimg_fail(error, capacity, UIMG_ERR_TOO_LARGE,
                         "image is %ux%u; the largest side accepted is %u pixels", width, height,
                         UIMG_MAX_DIMENSION);
    }
    // Each factor is below 2^17, so a 64-bit product cannot overflow; size_t may be narrower.
    uint64_t total = (uint64_t)width * (uint64_t)height * (uint64_t)channels;
    if (total > (uint64_t)UIMG_MAX_IMAGE_BYTES || total > (uint64_t)SIZE_MAX) {
        return uimg_fail(error, capacity, UIMG_ERR_TOO_LARGE,
                         "image is %ux%u with %u channels, more than the %zu bytes accepted",
                         width, height, channels, UIMG_MAX_IMAGE_BYTES);
    }
    *bytes = (size_t)total;
    return UIMG_OK;
}

int uimg_finish(uimg_image *out, uint8_t *pixels, uint32_t width, uint32_t height, uint32_t channels,
                int format, int had_alpha, int orientation) {
    uint32_t out_channels = channels;
    if (channels == 2 || channels == 4) {
        uimg_composite_over_black(pixels, (size_t)width * height, channels);
        out_channels = channels - 1;
    }
    out->width = width;
    out->height = height;
    out->channels = out_channels;
    out->format = format;
    out->had_alpha = had_alpha;
    out->orientation = orientation;
    out->pixels = pixels;
    return UIMG_OK;
}

void uimg_composite_over_black(uint8_t *pixels, size_t count, uint32_t channels_with_alpha) {
    const size_t in = channels_with_alpha, out = channels_with_alpha - 1;
    // Pixel i moves from i*in to i*out <= i*in; each sample is read before any write can reach it.
    for (size_t i = 0; i < count; i++) {
        const uint8_t *src = pixels + i * in;
        uint8_t *dst = pixels + i * out;
        const unsigned alpha = src[out];
        for (size_t c = 0; c < out; c++) {
            // round(x * a / 255): 255 is odd, so there are no ties.
            dst[c] = (uint8_t)((src[c] * alpha + 127u) / 255u);
        }
    }
}

int uimg_buffer_reserve(uimg_buffer *buffer, size_t extra) {
    if (extra <= buffer->capacity - buffer->size) return 0;
    if (extra > UIMG_MAX_IMAGE_BYTES - buffer->size) return -1;
    size_t needed = buffer->size + extra;
    size_t capacity = buffer->capacity < 4096 ? 4096 : buffer->capacity;
    while (capacity < needed) capacity = capacity > UIMG_MAX_IMAGE_BYTES / 2 ? needed : capacity * 2;
    uint8_t *data = realloc(buffer->data, capacity);
    if (data == NULL) return -1;
    buffer->data = data;
    buffer->capacity = capacity;
    return 0;
}

void uimg_free(void *buffer) { free(buffer); }

int uimg_detect_format(const uint8_t *data, size_t size) {
    static const uint8_t png_signature[8] = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
    if (data == NULL) return UIMG_FORMAT_UNKNOWN;
    if (size >= 8 && memcmp(data, png_signature, 8) == 0) return UIMG_FORMAT_PNG;
    if (size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF) return UIMG_FORMAT_JPEG;
    return UIMG_FORMAT_UNKNOWN;
}

/// Names well-known formats that are not decoded here, to make the error useful.
static const char *guess_other_format(const uint8_t *data, size_t size) {
    if (size >= 6 && (memcmp(data, "GIF87a", 6) == 0 || memcmp(data, "GIF89a", 6) == 0)) return "GIF";
    if (size >= 12 && memcmp(data, "RIFF", 4) == 0 && memcmp(data + 8, "WEBP", 4) == 0) return "WebP";
    if (size >= 2 && memcmp(data, "BM", 2) == 0) return "BMP";
    if (size >= 4 && (memcmp(data, "II*\0", 4) == 0 || memcmp(data, "MM\0*", 4) == 0)) return "TIFF";
    if (size >= 12 && memcmp(data + 4, "ftyp", 4) == 0) return "HEIF/AVIF/MP4";
    if (size >= 6 && memcmp(data, "\x93NUMPY", 6) == 0) return "NumPy .npy";
    if (size >= 4 && memcmp(data, "PK\x03\x04", 4) == 0) return "ZIP";
    if (size >= 1 && (data[0] == '<' || data[0] == '{')) return "text (HTML/XML/JSON)";
    if (size >= 4 && memcmp(data, "\x89PNG", 4) == 0) return "a damaged PNG (bad signature)";
    return NULL;
}

int uimg_unsupported_format(const uint8_t *data, size_t size, char *error, size_t capacity) {
    const char *other = guess_other_format(data, size);
    if (other != NULL) {
        return uimg_fail(error, capacity, UIMG_ERR_UNSUPPORTED,
                         "not a PNG or JPEG file (looks like %s)", other);
    }
    char head[3 * 8 + 1] = {0};
    for (size_t i = 0; i < size && i < 8; i++) snprintf(head + 3 * i, 4, "%02x ", data[i]);
    head[3 * (size < 8 ? size : 8) - 1] = '\0';
    return uimg_fail(error, capacity, UIMG_ERR_UNSUPPORTED,
                     "not a PNG or JPEG file (starts with bytes %s)", head);
}

/// Decodes with the pixels malloc'd (`borrow` 0) or in the thread's scratch (`borrow` 1).
static int decode_memory(const uint8_t *data, size_t size, const uimg_decode_options *options, int borrow,
                         uimg_image *out, char *error, size_t capacity) {
    if (out == NULL) return uimg_fail(error, capacity, UIMG_ERR_ARGUMENT, "no output image given");
    memset(out, 0, sizeof *out);
    if (data == NULL || size == 0) {
        return uimg_fail(error, capacity, UIMG_ERR_CORRUPT, "empty file (0 bytes)");
    }
    const uimg_decode_options defaults = {UIMG_DEFAULT_MAX_PIXELS, 0, 0};
    if (options == NULL) options = &defaults;
    // The header is read and checked against the pixel cap before either library sees the data.
    uimg_header header;
    int status = uimg_probe_memory(data, size, options->max_pixels, &header, error, capacity);
    if (status != UIMG_OK) return status;
    uimg_scratch *scratch = uimg_thread_scratch();
    if (scratch == NULL && borrow) return uimg_fail(error, capacity, UIMG_ERR_MEMORY, "out of memory for decode buffers");
    switch (header.format) {
    case UIMG_FORMAT_PNG:
        status = UIMG_PNG_DEFER;
        if (scratch != NULL) status = uimg_decode_png_fast(data, size, scratch, borrow, out, error, capacity);
        if (status != UIMG_PNG_DEFER) {
            if (status != UIMG_OK) memset(out, 0, sizeof *out);
            uimg_scratch_trim_work(scratch);
            return status;  // the pixels, borrowed or not, are where they belong
        }
        memset(out, 0, sizeof *out);
        status = uimg_decode_png(data, size, options, out, error, capacity);
        break;
    case UIMG_FORMAT_JPEG:
        status = uimg_decode_jpeg(data, size, options, out, error, capacity);
        break;
    default:
        return uimg_unsupported_format(data, size, error, capacity);
    }
    if (scratch != NULL) uimg_scratch_trim_work(scratch);
    if (status == UIMG_OK && borrow) {
        // libpng's and libjpeg's buffers become the thread's pixel buffer, reused by the next decode.
        free(scratch->pixels.data);
        scratch->pixels.data = out->pixels;
        scratch->pixels.capacity = (size_t)out->width * out->height * out->channels;
    }
    return status;
}

int uimg_decode_memory_options(const uint8_t *data, size_t size, const uimg_decode_options *options,
                               uimg_image *out, char *error, size_t capacity) {
    return decode_memory(data, size, options, 0, out, error, capacity);
}

int uimg_decode_memory_borrowed(const uint8_t *data, size_t size, const uimg_decode_options *options,
                                uimg_image *out, char *error, size_t capacity) {
    return decode_memory(data, size, options, 1, out, error, capacity);
}

int uimg_decode_memory(const uint8_t *data, size_t size, uimg_image *out, char *error, size_t capacity) {
    return uimg_decode_memory_options(data, size, NULL, out, error, capacity);
}

/// Reads the file into the thread's file buffer (a temporary one if the scratch cannot be had) and
/// decodes it.
static int decode_file(const char *path, const uimg_decode_options *options, int borrow, uimg_image *out,
                       char *error, size_t capacity) {
    if (out == NULL) return uimg_fail(error, capacity, UIMG_ERR_ARGUMENT, "no output image given");
    memset(out, 0, sizeof *out);
    uint64_t size = 0;
    const int fd = uimg_open_regular(path, &size, error, capacity);
    if (fd < 0) return -fd;
    if (size > UIMG_MAX_IMAGE_BYTES) {
        close(fd);
        return uimg_fail(error, capacity, UIMG_ERR_TOO_LARGE, "file is %llu bytes, more than the %zu accepted",
                         (unsigned long long)size, UIMG_MAX_IMAGE_BYTES);
    }
    if (size == 0) {
        close(fd);
        return uimg_fail(error, capacity, UIMG_ERR_CORRUPT, "empty file (0 bytes)");
    }
    // Probe the header first: a bomb is refused after reading a few bytes, not the whole file.
    uimg_header header;
    int status = uimg_probe_descriptor(fd, options == NULL ? 0 : options->max_pixels, &header, error, capacity);
    if (status != UIMG_OK) {
        close(fd);
        return status;
    }
    uimg_scratch *scratch = uimg_thread_scratch();
    uint8_t *data = scratch != NULL ? uimg_scratch_reserve(&scratch->file, (size_t)size) : malloc((size_t)size);
    if (data == NULL) {
        close(fd);
        return uimg_fail(error, capacity, UIMG_ERR_MEMORY, "out of memory reading a %llu-byte file",
                         (unsigned long long)size);
    }
    size_t done = 0;
    while (done < size) {
        ssize_t got = read(fd, data + done, (size_t)size - done);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            status = uimg_fail(error, capacity, UIMG_ERR_IO, "cannot read: %s", strerror(errno));
            break;
        }
        if (got == 0) break;  // the file shrank while being read: decode what is there
        done += (size_t)got;
    }
    close(fd);
    if (status == UIMG_OK) status = decode_memory(data, done, options, borrow, out, error, capacity);
    if (scratch == NULL) free(data);
    else uimg_scratch_trim_work(scratch);
    return status;
}

int uimg_decode_file_options(const char *path, const uimg_decode_options *options, uimg_image *out,
                             char *error, size_t capacity) {
    return decode_file(path, options, 0, out, error, capacity);
}

int uimg_decode_file_borrowed(const char *path, const uimg_decode_options *options, uimg_image *out,
                              char *error, size_t capacity) {
    return decode_file(path, options, 1, out, error, capacity);
}

int uimg_decode_file(const char *path, uimg_image *out, char *error, size_t capacity) {
    return uimg_decode_file_options(path, NULL, out, error, capacity);
}

/// The header checks decode_memory makes before either PNG decoder runs.
static int probe_png_only(const uint8_t *data, size_t size, uimg_image *out, char *error, size_t capacity) {
    if (out == NULL) return uimg_fail(error, capacity, UIMG_ERR_ARGUMENT, "no output image given");
    memset(out, 0, sizeof *out);
    if (data == NULL || size == 0) return uimg_fail(error, capacity, UIMG_ERR_CORRUPT, "empty file (0 bytes)");
    uimg_header header;
    const int status = uimg_probe_memory(data, size, 0, &header, error, capacity);
    if (status != UIMG_OK) return status;
    if (header.format != UIMG_FORMAT_PNG) return uimg_fail(error, capacity, UIMG_ERR_UNSUPPORTED, "not a PNG file");
    return UIMG_OK;
}

int uimg_decode_png_libpng_only(const uint8_t *data, size_t size, uimg_image *out, char *error, size_t capacity) {
    int status = probe_png_only(data, size, out, error, capacity);
    if (status != UIMG_OK) return status;
    const uimg_decode_options defaults = {UIMG_DEFAULT_MAX_PIXELS, 0, 0};
    return uimg_decode_png(data, size, &defaults, out, error, capacity);
}

int uimg_decode_png_fast_only(const uint8_t *data, size_t size, uimg_image *out, char *error, size_t capacity) {
    int status = probe_png_only(data, size, out, error, capacity);
    if (status != UIMG_OK) return status;
    uimg_scratch *scratch = uimg_thread_scratch();
    if (scratch == NULL) return uimg_fail(error, capacity, UIMG_ERR_MEMORY, "out of memory for decode buffers");
    status = uimg_decode_png_fast(data, size, scratch, 0, out, error, capacity);
    if (status != UIMG_OK) memset(out, 0, sizeof *out);
    uimg_scratch_trim_work(scratch);
    return status;
}
