// JPEG decoding and encoding through libjpeg (libjpeg-turbo on most distributions). libjpeg's
// error_exit is replaced by one that records the message and longjmps back; warnings about corrupt
// data are treated as errors too, so a damaged photo is reported rather than silently decoded with
// gray blocks. Source and destination managers are our own (plain memory), which keeps this file
// independent of the jpeg_mem_src / jpeg_mem_dest signatures that differ between libjpeg versions.

#include "image_io_internal.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jerror.h>
#include <jpeglib.h>

typedef struct {
    struct jpeg_error_mgr manager;  // first, so a j_common_ptr's err can be cast to this
    jmp_buf jump;
    char *error;
    size_t capacity;
    const char *prefix;
} jpeg_error_context;

static void on_jpeg_error(j_common_ptr cinfo) {
    jpeg_error_context *context = (jpeg_error_context *)cinfo->err;
    char message[JMSG_LENGTH_MAX];
    (*cinfo->err->format_message)(cinfo, message);
    uimg_fail(context->error, context->capacity, 0, "%s: %s", context->prefix, message);
    longjmp(context->jump, 1);
}

static void on_jpeg_message(j_common_ptr cinfo, int level) {
    // level -1 is a warning: all of them describe corrupt data except these two, which are harmless.
    if (level >= 0) return;
    const int code = cinfo->err->msg_code;
    if (code == JWRN_JFIF_MAJOR || code == JWRN_ADOBE_XFORM) return;
    on_jpeg_error(cinfo);
}

// libjpeg's standard error manager in `context`, its errors written to `error` after `prefix` and
// ending in a longjmp to context->jump (set it before the first libjpeg call).
static struct jpeg_error_mgr *error_manager(jpeg_error_context *context, const char *prefix, char *error, size_t capacity) {
    memset(context, 0, sizeof *context);
    struct jpeg_error_mgr *manager = jpeg_std_error(&context->manager);
    context->manager.error_exit = on_jpeg_error;
    context->error = error;
    context->capacity = capacity;
    context->prefix = prefix;
    return manager;
}

static void source_init(j_decompress_ptr cinfo) { (void)cinfo; }

static boolean source_fill(j_decompress_ptr cinfo) {
    // All the data was handed over at once: asking for more means the file was cut short.
    ERREXIT(cinfo, JERR_INPUT_EOF);
    return FALSE;
}

static void source_skip(j_decompress_ptr cinfo, long count) {
    struct jpeg_source_mgr *source = cinfo->src;
    if (count <= 0) return;
    if ((unsigned long)count > source->bytes_in_buffer) ERREXIT(cinfo, JERR_INPUT_EOF);
    source->next_input_byte += count;
    source->bytes_in_buffer -= (size_t)count;
}

static void source_term(j_decompress_ptr cinfo) { (void)cinfo; }

/// Reads a 16- or 32-bit TIFF integer at `offset` (the caller checked the bounds).
static uint32_t tiff_u16(const uint8_t *p, size_t offset, int little) {
    return little ? (uint32_t)p[offset] | (uint32_t)p[offset + 1] << 8
                  : (uint32_t)p[offset] << 8 | (uint32_t)p[offset + 1];
}

static uint32_t tiff_u32(const uint8_t *p, size_t offset, int little) {
    return little ? tiff_u16(p, offset, 1) | tiff_u16(p, offset + 2, 1) << 16
                  : tiff_u16(p, offset, 0) << 16 | tiff_u16(p, offset + 2, 0);
}

/// The EXIF orientation (1...8) in an APP1 segment's data, or 1 when there is none or it is malformed.
static int exif_orientation(const uint8_t *data, size_t size) {
    static const uint8_t exif_id[6] = {'E', 'x', 'i', 'f', 0, 0};
    if (size < 6 + 8 || memcmp(data, exif_id, 6) != 0) return 1;
    const uint8_t *tiff = data + 6;
    const size_t n = size - 6;
    int little;
    if (tiff[0] == 'I' && tiff[1] == 'I') little = 1;
    else if (tiff[0] == 'M' && tiff[1] == 'M') little = 0;
    else return 1;
    if (tiff_u16(tiff, 2, little) != 42) return 1;
    const uint32_t ifd = tiff_u32(tiff, 4, little);
    if (ifd > n || n - ifd < 2) return 1;
    const uint32_t entries = tiff_u16(tiff, ifd, little);
    for (uint32_t i = 0; i < entries; i++) {
        const size_t entry = (size_t)ifd + 2 + (size_t)i * 12;
        if (entry > n || n - entry < 12) return 1;
        if (tiff_u16(tiff, entry, little) != 0x0112) continue;
        // Orientation: type SHORT (3), count 1, the value in the first two bytes of the value field.
        if (tiff_u16(tiff, entry + 2, little) != 3 || tiff_u32(tiff, entry + 4, little) != 1) return 1;
        const uint32_t value = tiff_u16(tiff, entry + 8, little);
        return value >= 1 && value <= 8 ? (int)value : 1;
    }
    return 1;
}

/// Returns a new buffer holding `pixels` (width x height x channels) turned upright for EXIF
/// `orientation` 2...8, with the output size in *out_width / *out_height, or NULL when out of memory.
/// For output pixel (x, y), the source pixel is:
///   2 (mirrored): (W-1-x, y)      3 (rotated 180): (W-1-x, H-1-y)   4 (flipped): (x, H-1-y)
///   5 (transposed): (y, x)        6 (needs 90 CW): (y, H-1-x)
///   7 (transverse): (W-1-y, H-1-x)  8 (needs 90 CCW): (W-1-y, x)
static uint8_t *apply_orientation(const uint8_t *pixels, uint32_t width, uint32_t height, uint32_t channels,
                                  int orientation, uint32_t *out_width, uint32_t *out_height) {
    const int swap = orientation >= 5;
    const uint32_t ow = swap ? height : width, oh = swap ? width : height;
    uint8_t *out = malloc((size_t)width * height * channels);
    if (out == NULL) return NULL;
    for (uint32_t y = 0; y < oh; y++) {
        for (uint32_t x = 0; x < ow; x++) {
            uint32_t sx = x, sy = y;
            switch (orientation) {
            case 2: sx = width - 1 - x; break;
            case 3: sx = width - 1 - x; sy = height - 1 - y; break;
            case 4: sy = height - 1 - y; break;
            case 5: sx = y; sy = x; break;
            case 6: sx = y; sy = height - 1 - x; break;
            case 7: sx = width - 1 - y; sy = height - 1 - x; break;
            case 8: sx = width - 1 - y; sy = x; break;
            default: break;
            }
            memcpy(out + ((size_t)y * ow + x) * channels, pixels + ((size_t)sy * width + sx) * channels, channels);
        }
    }
    *out_width = ow;
    *out_height = oh;
    return out;
}

int uimg_decode_jpeg(const uint8_t *data, size_t size, const uimg_decode_options *options, uimg_image *out,
                     char *error, size_t capacity) {
    struct jpeg_decompress_struct cinfo;
    jpeg_error_context context;
    memset(&cinfo, 0, sizeof cinfo);
    cinfo.err = error_manager(&context, "invalid JPEG data", error, capacity);
    context.manager.emit_message = on_jpeg_message;

    struct jpeg_source_mgr source;
    memset(&source, 0, sizeof source);
    source.init_source = source_init;
    source.fill_input_buffer = source_fill;
    source.skip_input_data = source_skip;
    source.resync_to_restart = jpeg_resync_to_restart;
    source.term_source = source_term;
    source.next_input_byte = data;
    source.bytes_in_buffer = size;

    uint8_t *volatile pixels = NULL;
    volatile int status = UIMG_ERR_CORRUPT;
    if (setjmp(context.jump)) {
        jpeg_destroy_decompress(&cinfo);
        free(pixels);
        memset(out, 0, sizeof *out);
        return status;
    }
    jpeg_create_decompress(&cinfo);
    cinfo.src = &source;
    jpeg_save_markers(&cinfo, JPEG_APP0 + 1, 0xFFFF);  // APP1: EXIF, for the orientation
    jpeg_read_header(&cinfo, TRUE);
    int orientation = 1;
    for (jpeg_saved_marker_ptr marker = cinfo.marker_list; marker != NULL; marker = marker->next) {
        if (marker->marker == JPEG_APP0 + 1) {
            orientation = exif_orientation(marker->data, marker->data_length);
            if (orientation != 1) break;
        }
    }

    switch (cinfo.jpeg_color_space) {
    case JCS_GRAYSCALE: cinfo.out_color_space = JCS_GRAYSCALE; break;
    case JCS_YCbCr:
    case JCS_RGB: cinfo.out_color_space = JCS_RGB; break;
    default:
        status = UIMG_ERR_UNSUPPORTED;
        uimg_fail(error, capacity, 0, "%s JPEG images are not supported; convert the image to RGB",
                  cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK ? "CMYK" : "this color space of");
        longjmp(context.jump, 1);
    }
    size_t bytes = 0;
    const uint32_t channels = cinfo.out_color_space == JCS_GRAYSCALE ? 1 : 3;
    int size_status = uimg_image_bytes(cinfo.image_width, cinfo.image_height, channels, &bytes, error, capacity);
    if (size_status != UIMG_OK) {
        status = size_status;
        longjmp(context.jump, 1);
    }
    // DCT-domain scaling: the smallest of 1/2, 1/4, 1/8 that still covers the size asked for. The
    // orientation swaps width and height afterwards, so compare against the upright size.
    if (options->min_width > 0 && options->min_height > 0) {
        const int swap = orientation >= 5;
        const uint32_t upright_w = swap ? cinfo.image_height : cinfo.image_width;
        const uint32_t upright_h = swap ? cinfo.image_width : cinfo.image_height;
        unsigned denom = 1;
        while (denom < 8 && upright_w / (denom * 2) >= options->min_width && upright_h / (denom * 2) >= options->min_height) {
            denom *= 2;
        }
        cinfo.scale_num = 1;
        cinfo.scale_denom = denom;
    }
    jpeg_calc_output_dimensions(&cinfo);
    if (cinfo.output_width != cinfo.image_width || cinfo.output_height != cinfo.image_height) {
        size_status = uimg_image_bytes(cinfo.output_width, cinfo.output_height, channels, &bytes, error, capacity);
        if (size_status != UIMG_OK) {
            status = size_status;
            longjmp(context.jump, 1);
        }
    }
    jpeg_start_decompress(&cinfo);
    if ((uint32_t)cinfo.output_components != channels) {
        uimg_fail(error, capacity, 0, "invalid JPEG data: unexpected output layout");
        longjmp(context.jump, 1);
    }
    pixels = malloc(bytes);
    if (pixels == NULL) {
        status = UIMG_ERR_MEMORY;
        uimg_fail(error, capacity, 0, "out of memory for a %ux%u JPEG", cinfo.image_width, cinfo.image_height);
        longjmp(context.jump, 1);
    }
    const size_t row_bytes = (size_t)cinfo.output_width * channels;
    while (cinfo.output_scanline < cinfo.output_height) {
        JSAMPROW row = pixels + (size_t)cinfo.output_scanline * row_bytes;
        if (jpeg_read_scanlines(&cinfo, &row, 1) != 1) {
            uimg_fail(error, capacity, 0, "invalid JPEG data: no scanline returned");
            longjmp(context.jump, 1);
        }
    }
    jpeg_finish_decompress(&cinfo);
    uint32_t width = cinfo.output_width, height = cinfo.output_height;
    uint8_t *result = pixels;
    jpeg_destroy_decompress(&cinfo);

    if (orientation != 1) {
        uint8_t *upright = apply_orientation(result, width, height, channels, orientation, &width, &height);
        free(result);
        if (upright == NULL) {
            memset(out, 0, sizeof *out);
            return uimg_fail(error, capacity, UIMG_ERR_MEMORY, "out of memory turning a %ux%u JPEG upright",
                             width, height);
        }
        result = upright;
    }
    return uimg_finish(out, result, width, height, channels, UIMG_FORMAT_JPEG, 0, orientation);
}

// MARK: - Encoding

/// The destination manager, with the growable buffer it fills (heap-allocated by the caller).
typedef struct {
    struct jpeg_destination_mgr manager;  // first, so cinfo->dest can be cast to this
    uimg_buffer buffer;
} jpeg_memory_destination;

static void destination_init(j_compress_ptr cinfo) {
    jpeg_memory_destination *destination = (jpeg_memory_destination *)cinfo->dest;
    if (uimg_buffer_reserve(&destination->buffer, 4096) != 0) ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 1);
    destination->manager.next_output_byte = destination->buffer.data;
    destination->manager.free_in_buffer = destination->buffer.capacity;
}

static boolean destination_empty(j_compress_ptr cinfo) {
    // Called when the whole buffer is full, whatever free_in_buffer says.
    jpeg_memory_destination *destination = (jpeg_memory_destination *)cinfo->dest;
    destination->buffer.size = destination->buffer.capacity;
    if (uimg_buffer_reserve(&destination->buffer, destination->buffer.capacity) != 0) {
        ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 2);
    }
    destination->manager.next_output_byte = destination->buffer.data + destination->buffer.size;
    destination->manager.free_in_buffer = destination->buffer.capacity - destination->buffer.size;
    return TRUE;
}

static void destination_term(j_compress_ptr cinfo) {
    jpeg_memory_destination *destination = (jpeg_memory_destination *)cinfo->dest;
    destination->buffer.size = destination->buffer.capacity - destination->manager.free_in_buffer;
}

int uimg_encode_jpeg(const uint8_t *pixels, uint32_t width, uint32_t height, uint32_t channels, int quality,
                     uint8_t **out, size_t *out_size, char *error, size_t capacity) {
    if (out == NULL || out_size == NULL || pixels == NULL) {
        return uimg_fail(error, capacity, UIMG_ERR_ARGUMENT, "no pixels or output given");
    }
    *out = NULL;
    *out_size = 0;
    if (channels != 1 && channels != 3) {
        return uimg_fail(error, capacity, UIMG_ERR_ARGUMENT, "JPEG needs 1 or 3 channels, got %u", channels);
    }
    if (quality < 1 || quality > 100) {
        return uimg_fail(error, capacity, UIMG_ERR_ARGUMENT, "JPEG quality must be 1...100, got %d", quality);
    }
    size_t bytes = 0;
    int status = uimg_image_bytes(width, height, channels, &bytes, error, capacity);
    if (status != UIMG_OK) return status == UIMG_ERR_TOO_LARGE ? status : UIMG_ERR_ARGUMENT;

    struct jpeg_compress_struct cinfo;
    jpeg_error_context context;
    memset(&cinfo, 0, sizeof cinfo);
    cinfo.err = error_manager(&context, "cannot encode JPEG", error, capacity);
    // Heap-allocated: its fields change after setjmp, the pointer does not.
    jpeg_memory_destination *destination = calloc(1, sizeof(jpeg_memory_destination));
    if (destination == NULL) return uimg_fail(error, capacity, UIMG_ERR_MEMORY, "out of memory creating a JPEG writer");
    destination->manager.init_destination = destination_init;
    destination->manager.empty_output_buffer = destination_empty;
    destination->manager.term_destination = destination_term;

    if (setjmp(context.jump)) {
        jpeg_destroy_compress(&cinfo);
        free(destination->buffer.data);
        free(destination);
        return UIMG_ERR_MEMORY;  // the arguments were checked, so only allocations can fail
    }
    jpeg_create_compress(&cinfo);
    cinfo.dest = &destination->manager;
    cinfo.image_width = width;
    cinfo.image_height = height;
    cinfo.input_components = (int)channels;
    cinfo.in_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(&cinfo);
    jpeg_set_quality(&cinfo, quality, TRUE);
    for (int i = 0; i < cinfo.num_components; i++) {
        cinfo.comp_info[i].h_samp_factor = 1;  // 4:4:4, no chroma subsampling
        cinfo.comp_info[i].v_samp_factor = 1;
    }
    jpeg_start_compress(&cinfo, TRUE);
    const size_t row_bytes = (size_t)width * channels;
    while (cinfo.next_scanline < cinfo.image_height) {
        JSAMPROW row = (JSAMPROW)(pixels + (size_t)cinfo.next_scanline * row_bytes);
        jpeg_write_scanlines(&cinfo, &row, 1);
    }
    jpeg_finish_compress(&cinfo);
    jpeg_destroy_compress(&cinfo);

    *out = destination->buffer.data;
    *out_size = destination->buffer.size;
    free(destination);
    return UIMG_OK;
}
