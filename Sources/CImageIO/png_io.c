// PNG decoding and encoding through libpng. libpng reports errors by calling our handler, which
// records the message and longjmps back to the setjmp in the function that started the work; every
// such function frees what it allocated on that path. Locals assigned after setjmp are volatile.

#include "image_io_internal.h"

#include <png.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

/// Where libpng's error handler leaves its message.
typedef struct {
    char *error;
    size_t capacity;
    const char *prefix;
} png_error_context;

static void on_png_error(png_structp png, png_const_charp message) {
    png_error_context *context = (png_error_context *)png_get_error_ptr(png);
    if (context != NULL) uimg_fail(context->error, context->capacity, 0, "%s: %s", context->prefix, message);
    png_longjmp(png, 1);
}

static void on_png_warning(png_structp png, png_const_charp message) {
    // Warnings (an unknown ancillary chunk, a bad ICC profile) do not affect the pixels.
    (void)png;
    (void)message;
}

typedef struct {
    const uint8_t *data;
    size_t size;
    size_t position;
} png_memory_reader;

static void read_from_memory(png_structp png, png_bytep out, size_t count) {
    png_memory_reader *reader = (png_memory_reader *)png_get_io_ptr(png);
    if (count > reader->size - reader->position) png_error(png, "truncated (unexpected end of data)");
    memcpy(out, reader->data + reader->position, count);
    reader->position += count;
}

int uimg_decode_png(const uint8_t *data, size_t size, const uimg_decode_options *options, uimg_image *out,
                    char *error, size_t capacity) {
    (void)options;  // the pixel cap was checked on the header; PNG has no reduced-size decoding
    png_memory_reader reader = {data, size, 0};
    png_error_context context = {error, capacity, "invalid PNG data"};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &context, on_png_error, on_png_warning);
    if (png == NULL) return uimg_fail(error, capacity, UIMG_ERR_MEMORY, "out of memory creating a PNG reader");
    png_infop info = png_create_info_struct(png);
    if (info == NULL) {
        png_destroy_read_struct(&png, NULL, NULL);
        return uimg_fail(error, capacity, UIMG_ERR_MEMORY, "out of memory creating a PNG reader");
    }

    uint8_t *volatile pixels = NULL;
    png_bytep *volatile rows = NULL;
    volatile int status = UIMG_ERR_CORRUPT;  // what a longjmp back here means, unless set otherwise
    if (setjmp(png_jmpbuf(png))) {
        free(rows);
        free(pixels);
        png_destroy_read_struct(&png, &info, NULL);
        memset(out, 0, sizeof *out);
        return status;
    }

    png_set_read_fn(png, &reader, read_from_memory);
    png_set_user_limits(png, UIMG_MAX_DIMENSION, UIMG_MAX_DIMENSION);
    png_read_info(png, info);

    png_uint_32 width = 0, height = 0;
    int bit_depth = 0, color_type = 0;
    png_get_IHDR(png, info, &width, &height, &bit_depth, &color_type, NULL, NULL, NULL);
    const int had_alpha = (color_type & PNG_COLOR_MASK_ALPHA) != 0 || png_get_valid(png, info, PNG_INFO_tRNS);

    // Normalise to 8-bit gray, gray+alpha, RGB or RGBA; alpha is composited after reading.
    if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if (color_type == PNG_COLOR_TYPE_GRAY && bit_depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (png_get_valid(png, info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(png);
    if (bit_depth == 16) png_set_scale_16(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);

    const uint32_t channels = png_get_channels(png, info);
    size_t bytes = 0;
    if (png_get_bit_depth(png, info) != 8 || channels < 1 || channels > 4) {
        status = UIMG_ERR_UNSUPPORTED;
        uimg_fail(error, capacity, 0, "PNG layout not supported (bit depth %d, %u channels after expansion)",
                  png_get_bit_depth(png, info), channels);
        png_longjmp(png, 1);
    }
    int size_status = uimg_image_bytes(width, height, channels, &bytes, error, capacity);
    if (size_status != UIMG_OK) {
        status = size_status;
        png_longjmp(png, 1);
    }
    const size_t row_bytes = (size_t)width * channels;
    if (png_get_rowbytes(png, info) != row_bytes) png_error(png, "unexpected row size after expansion");

    pixels = malloc(bytes);
    rows = malloc((size_t)height * sizeof(png_bytep));
    if (pixels == NULL || rows == NULL) {
        status = UIMG_ERR_MEMORY;
        uimg_fail(error, capacity, 0, "out of memory for a %ux%u PNG", width, height);
        png_longjmp(png, 1);
    }
    for (png_uint_32 y = 0; y < height; y++) rows[y] = pixels + (size_t)y * row_bytes;
    png_read_image(png, rows);
    png_read_end(png, NULL);  // checks the rest of the stream, so a file cut short is an error

    uint8_t *result = pixels;
    free(rows);
    png_destroy_read_struct(&png, &info, NULL);

    return uimg_finish(out, result, width, height, channels, UIMG_FORMAT_PNG, had_alpha, 1);
}

// MARK: - Encoding

static void write_to_buffer(png_structp png, png_bytep data, size_t count) {
    uimg_buffer *buffer = (uimg_buffer *)png_get_io_ptr(png);
    if (uimg_buffer_reserve(buffer, count) != 0) png_error(png, "out of memory writing PNG");
    memcpy(buffer->data + buffer->size, data, count);
    buffer->size += count;
}

static void flush_buffer(png_structp png) { (void)png; }

static int samples_per_pixel(int color_type) {
    switch (color_type) {
    case UIMG_PNG_GRAY: return 1;
    case UIMG_PNG_PALETTE: return 1;
    case UIMG_PNG_GRAY_ALPHA: return 2;
    case UIMG_PNG_RGB: return 3;
    case UIMG_PNG_RGBA: return 4;
    default: return 0;
    }
}

/// Checks the spec against PNG's rules, and the samples against the bit depth and palette, so the
/// encoder never writes a file that decoders reject.
static int check_png_spec(const uimg_png_spec *spec, size_t *row_bytes, char *error, size_t capacity) {
    const int spp = samples_per_pixel(spec->color_type);
    const int depth = spec->bit_depth;
    if (spp == 0) return uimg_fail(error, capacity, UIMG_ERR_ARGUMENT, "unknown PNG color type %d", spec->color_type);
    int depth_ok;
    switch (spec->color_type) {
    case UIMG_PNG_GRAY: depth_ok = depth == 1 || depth == 2 || depth == 4 || depth == 8 || depth == 16; break;
    case UIMG_PNG_PALETTE: depth_ok = depth == 1 || depth == 2 || depth == 4 || depth == 8; break;
    default: depth_ok = depth == 8 || depth == 16; break;
    }
    if (!depth_ok) {
        return uimg_fail(error, capacity, UIMG_ERR_ARGUMENT, "bit depth %d not allowed for PNG color type %d",
                         depth, spec->color_type);
    }
    if (spec->samples == NULL) return uimg_fail(error, capacity, UIMG_ERR_ARGUMENT, "no samples given");
    if (spec->filters < 0 || spec->filters > 31) {
        return uimg_fail(error, capacity, UIMG_ERR_ARGUMENT, "PNG filter set %d is not a set of types 0...4 (bits 0...4)",
                         spec->filters);
    }
    if (spec->idat_bytes != 0 && (spec->idat_bytes < 6 || spec->idat_bytes > 0x7FFFFFFFu)) {
        return uimg_fail(error, capacity, UIMG_ERR_ARGUMENT, "IDAT chunk size %u is outside 6...2^31-1 (0: the default)",
                         spec->idat_bytes);
    }
    size_t bytes = 0;
    int status = uimg_image_bytes(spec->width, spec->height, (uint32_t)(spp * (depth == 16 ? 2 : 1)), &bytes,
                                  error, capacity);
    if (status != UIMG_OK) return status == UIMG_ERR_TOO_LARGE ? status : UIMG_ERR_ARGUMENT;
    *row_bytes = bytes / spec->height;

    if (spec->color_type == UIMG_PNG_PALETTE) {
        if (spec->palette == NULL || spec->palette_count < 1 || spec->palette_count > 256 ||
            spec->palette_count > (1 << depth)) {
            return uimg_fail(error, capacity, UIMG_ERR_ARGUMENT,
                             "a palette image needs 1...%d palette entries, got %d", depth < 8 ? 1 << depth : 256,
                             spec->palette_count);
        }
        if (spec->palette_alpha_count < 0 || spec->palette_alpha_count > spec->palette_count ||
            (spec->palette_alpha_count > 0 && spec->palette_alpha == NULL)) {
            return uimg_fail(error, capacity, UIMG_ERR_ARGUMENT, "palette alpha count %d is out of range",
                             spec->palette_alpha_count);
        }
    }
    if (depth < 8 || spec->color_type == UIMG_PNG_PALETTE) {
        const unsigned limit = spec->color_type == UIMG_PNG_PALETTE ? (unsigned)spec->palette_count : 1u << depth;
        for (size_t i = 0; i < bytes; i++) {
            if (spec->samples[i] >= limit) {
                return uimg_fail(error, capacity, UIMG_ERR_ARGUMENT, "sample %zu is %u, not below %u", i,
                                 spec->samples[i], limit);
            }
        }
    }
    return UIMG_OK;
}

int uimg_encode_png(const uimg_png_spec *spec, uint8_t **out, size_t *out_size, char *error, size_t capacity) {
    if (out == NULL || out_size == NULL || spec == NULL) {
        return uimg_fail(error, capacity, UIMG_ERR_ARGUMENT, "no spec or output given");
    }
    *out = NULL;
    *out_size = 0;
    size_t row_bytes = 0;
    int status = check_png_spec(spec, &row_bytes, error, capacity);
    if (status != UIMG_OK) return status;

    png_error_context context = {error, capacity, "cannot encode PNG"};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &context, on_png_error, on_png_warning);
    if (png == NULL) return uimg_fail(error, capacity, UIMG_ERR_MEMORY, "out of memory creating a PNG writer");
    png_infop info = png_create_info_struct(png);
    // The buffer lives on the heap: its fields change after setjmp, the pointer does not.
    uimg_buffer *buffer = calloc(1, sizeof(uimg_buffer));
    png_bytep *volatile rows = NULL;
    if (info == NULL || buffer == NULL) {
        free(buffer);
        png_destroy_write_struct(&png, info == NULL ? NULL : &info);
        return uimg_fail(error, capacity, UIMG_ERR_MEMORY, "out of memory creating a PNG writer");
    }
    if (setjmp(png_jmpbuf(png))) {
        free(rows);
        free(buffer->data);
        free(buffer);
        png_destroy_write_struct(&png, &info);
        return UIMG_ERR_MEMORY;  // the spec was checked, so only allocations can fail
    }
    png_set_write_fn(png, buffer, write_to_buffer, flush_buffer);
    if (spec->idat_bytes != 0) png_set_compression_buffer_size(png, spec->idat_bytes);  // sizes the IDAT chunks
    // libpng numbers its filter flags from PNG_FILTER_NONE (0x08) up, one bit per type.
    if (spec->filters != 0) png_set_filter(png, PNG_FILTER_TYPE_BASE, spec->filters << 3);
    png_set_IHDR(png, info, spec->width, spec->height, spec->bit_depth, spec->color_type,
                 spec->interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    if (spec->color_type == UIMG_PNG_PALETTE) {
        png_color palette[256];
        for (int i = 0; i < spec->palette_count; i++) {
            palette[i].red = spec->palette[3 * i];
            palette[i].green = spec->palette[3 * i + 1];
            palette[i].blue = spec->palette[3 * i + 2];
        }
        png_set_PLTE(png, info, palette, spec->palette_count);
        if (spec->palette_alpha_count > 0) {
            png_set_tRNS(png, info, spec->palette_alpha, spec->palette_alpha_count, NULL);
        }
    }
    png_write_info(png, info);
    if (spec->bit_depth < 8) png_set_packing(png);
    rows = malloc((size_t)spec->height * sizeof(png_bytep));
    if (rows == NULL) png_error(png, "out of memory");
    for (uint32_t y = 0; y < spec->height; y++) rows[y] = (png_bytep)(spec->samples + (size_t)y * row_bytes);
    png_write_image(png, rows);  // libpng copies each row before transforming it
    png_write_end(png, NULL);

    free(rows);
    png_destroy_write_struct(&png, &info);
    *out = buffer->data;
    *out_size = buffer->size;
    free(buffer);
    return UIMG_OK;
}
