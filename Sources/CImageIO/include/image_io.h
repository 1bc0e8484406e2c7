#ifndef UPDRAFT_IMAGE_IO_H
#define UPDRAFT_IMAGE_IO_H
// Image decoding through libpng and libjpeg. Their errors unwind with longjmp, which Swift cannot
// catch, so they are contained here and returned as messages.
//
// Every function returns UIMG_OK (0) or one of the UIMG_ERR_* codes, and on failure writes a
// NUL-terminated, human-readable message into `error` (at most `error_capacity` bytes, truncated).
// Nothing is left allocated on a failure path; on success the caller owns the returned buffer and
// releases it with uimg_free.

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    UIMG_OK = 0,
    UIMG_ERR_IO = 1,           // the file cannot be opened or read
    UIMG_ERR_UNSUPPORTED = 2,  // not PNG or JPEG, or a variant this library does not decode (CMYK JPEG)
    UIMG_ERR_CORRUPT = 3,      // malformed or truncated data
    UIMG_ERR_TOO_LARGE = 4,    // dimensions beyond UIMG_MAX_IMAGE_BYTES / UIMG_MAX_DIMENSION
    UIMG_ERR_MEMORY = 5,       // an allocation failed
    UIMG_ERR_ARGUMENT = 6      // the caller passed something invalid (encoders)
};

enum { UIMG_FORMAT_UNKNOWN = 0, UIMG_FORMAT_PNG = 1, UIMG_FORMAT_JPEG = 2 };

/// Largest width or height accepted (both formats' own limits are lower or equal for JPEG).
#define UIMG_MAX_DIMENSION 65535u
/// Largest decoded buffer (width * height * channels) accepted, and largest file read: 1 GiB.
#define UIMG_MAX_IMAGE_BYTES ((size_t)1 << 30)
/// The default pixel cap (width * height), checked on the header before anything is decoded: Pillow's
/// MAX_IMAGE_PIXELS (1024 * 1024 * 1024 / 4 / 3), so a file Pillow opens without a bomb warning opens here.
#define UIMG_DEFAULT_MAX_PIXELS 89478485ull

/// A decoded image: 8 bits per sample, rows top to bottom, samples interleaved.
/// `channels` is 1 (gray) or 3 (RGB). Alpha, where the file has it (an alpha channel or a PNG tRNS
/// chunk), is composited over black (each color sample multiplied by alpha / 255, rounded), which is
/// what drawing the image into a premultiplied 8-bit buffer gives; 16-bit samples are scaled to 8 bits
/// with rounding; palettes and 1/2/4-bit gray are expanded. A JPEG's EXIF orientation is applied, so
/// the image is upright as viewers show it (width and height swap for orientations 5...8).
typedef struct {
    uint32_t width;
    uint32_t height;
    uint32_t channels;
    int format;          // UIMG_FORMAT_PNG or UIMG_FORMAT_JPEG
    int had_alpha;       // 1 if the file carried alpha (now composited), else 0
    int orientation;     // the EXIF orientation (1...8) of a JPEG, already applied; 1 otherwise
    uint8_t *pixels;     // width * height * channels bytes; release with uimg_free
} uimg_image;

/// What a file's header declares, read without decoding any pixels.
typedef struct {
    uint32_t width;       // as stored (before any EXIF orientation)
    uint32_t height;
    uint32_t channels;    // samples per pixel the decoder works with before alpha is composited (1...4)
    int format;           // UIMG_FORMAT_PNG or UIMG_FORMAT_JPEG
    int progressive;      // 1 for a progressive JPEG or an interlaced PNG (the decoder holds more memory)
} uimg_header;

/// Limits and hints for decoding.
typedef struct {
    /// Largest width * height accepted, checked on the header before decoding; 0 means the default.
    uint64_t max_pixels;
    /// When both are > 0, a JPEG may be decoded at 1/2, 1/4 or 1/8 of its size (libjpeg's DCT-domain
    /// scaling): the smallest scale whose output is still at least min_width x min_height.
    uint32_t min_width;
    uint32_t min_height;
} uimg_decode_options;

/// Reads the header of PNG or JPEG data (the signature, then PNG's IHDR or JPEG's markers up to the
/// frame header) and checks it against `max_pixels` (0: the default). Decodes nothing.
int uimg_probe_memory(const uint8_t *data, size_t size, uint64_t max_pixels, uimg_header *out,
                      char *error, size_t error_capacity);

/// Reads a file's header as uimg_probe_memory does, reading only as far as the header. Only regular
/// files are read: a FIFO, a device or a folder (or a link to one) is refused without blocking.
int uimg_probe_file(const char *path, uint64_t max_pixels, uimg_header *out, char *error, size_t error_capacity);

/// Decodes PNG or JPEG data with `options` (NULL: the defaults). The header is checked against the
/// pixel cap before any decoding. On failure `*out` is zeroed.
int uimg_decode_memory_options(const uint8_t *data, size_t size, const uimg_decode_options *options,
                               uimg_image *out, char *error, size_t error_capacity);

/// Reads a regular file (refusing FIFOs, devices and folders without blocking, and files over
/// UIMG_MAX_IMAGE_BYTES before reading them) and decodes it as uimg_decode_memory_options does.
int uimg_decode_file_options(const char *path, const uimg_decode_options *options, uimg_image *out,
                             char *error, size_t error_capacity);

/// As uimg_decode_memory_options, but the pixels are borrowed: `out->pixels` points into a buffer of
/// the calling thread, valid until its next decode, and must not be freed. Decoding a stream of images
/// this way allocates nothing once the thread's buffers have grown to the largest image (see
/// uimg_scratch_trim).
int uimg_decode_memory_borrowed(const uint8_t *data, size_t size, const uimg_decode_options *options,
                                uimg_image *out, char *error, size_t error_capacity);

/// As uimg_decode_file_options, with borrowed pixels as uimg_decode_memory_borrowed returns them; the
/// file's bytes are read into the thread's buffer too.
int uimg_decode_file_borrowed(const char *path, const uimg_decode_options *options, uimg_image *out,
                              char *error, size_t error_capacity);

/// Releases those of the calling thread's decode buffers that grew past 8 MiB (a large image), so a
/// thread keeps at most a few such buffers between decodes. Borrowed pixels are invalid afterwards.
void uimg_scratch_trim(void);

/// Releases all of the calling thread's decode buffers (they are released when the thread ends too).
void uimg_scratch_release(void);

/// Bytes the calling thread's decode buffers hold now.
size_t uimg_scratch_bytes(void);

/// For tests, which compare PNG's two decoders: the data through libpng alone, or through the fast path
/// alone (8-bit gray, gray+alpha, RGB, RGBA, not interlaced, no tRNS: png_fast.c), which returns
/// UIMG_PNG_LEFT_TO_LIBPNG for any other file, damaged ones included. Both check the header against the
/// default pixel cap first; the pixels are malloc'd (release with uimg_free).
#define UIMG_PNG_LEFT_TO_LIBPNG (-1)
int uimg_decode_png_libpng_only(const uint8_t *data, size_t size, uimg_image *out, char *error, size_t error_capacity);
int uimg_decode_png_fast_only(const uint8_t *data, size_t size, uimg_image *out, char *error, size_t error_capacity);

/// The format the first bytes announce (PNG signature or JPEG SOI marker), or UIMG_FORMAT_UNKNOWN.
int uimg_detect_format(const uint8_t *data, size_t size);

/// Decodes PNG or JPEG data held in memory, with the default options. On failure `*out` is zeroed.
int uimg_decode_memory(const uint8_t *data, size_t size, uimg_image *out,
                       char *error, size_t error_capacity);

/// Reads the whole file (a regular file of at most UIMG_MAX_IMAGE_BYTES) and decodes it as
/// uimg_decode_memory does.
int uimg_decode_file(const char *path, uimg_image *out, char *error, size_t error_capacity);

/// Releases a buffer returned by this library (decoded pixels or encoded bytes). NULL is fine.
void uimg_free(void *buffer);

/// PNG color types, with PNG's own numbering.
enum {
    UIMG_PNG_GRAY = 0,
    UIMG_PNG_RGB = 2,
    UIMG_PNG_PALETTE = 3,
    UIMG_PNG_GRAY_ALPHA = 4,
    UIMG_PNG_RGBA = 6
};

/// What to encode as PNG. `samples` holds `height` rows of `width * samples_per_pixel` samples with
/// no padding: one byte per sample for bit depths 1, 2, 4 and 8 (values below 2^bit_depth; the encoder
/// packs sub-byte depths), two bytes big-endian per sample for bit depth 16. Palette images take
/// indices below `palette_count`; `palette` holds RGB triples and `palette_alpha` (optional, at most
/// `palette_count` entries) their alpha (a tRNS chunk).
typedef struct {
    uint32_t width;
    uint32_t height;
    int color_type;              // UIMG_PNG_*
    int bit_depth;               // 1, 2, 4, 8 or 16, as PNG allows for the color type
    const uint8_t *samples;
    const uint8_t *palette;      // palette_count * 3 bytes, palette images only
    int palette_count;           // 1...256 and at most 2^bit_depth
    const uint8_t *palette_alpha;
    int palette_alpha_count;
    int interlaced;              // 1 for Adam7
    int filters;                 // the filter types libpng may choose from for each row, as bits 1 << type
                                 // (1 << 0 None ... 1 << 4 Paeth); 0: all five (libpng's default)
    uint32_t idat_bytes;         // the most data bytes per IDAT chunk, at least 6; 0: libpng's default (8192)
} uimg_png_spec;

/// Encodes a PNG into a new buffer (`*out`, `*out_size`; release with uimg_free).
int uimg_encode_png(const uimg_png_spec *spec, uint8_t **out, size_t *out_size,
                    char *error, size_t error_capacity);

/// Encodes 8-bit gray (channels 1) or RGB (channels 3) pixels as a baseline JPEG with no chroma
/// subsampling at `quality` 1...100.
int uimg_encode_jpeg(const uint8_t *pixels, uint32_t width, uint32_t height, uint32_t channels,
                     int quality, uint8_t **out, size_t *out_size, char *error, size_t error_capacity);

#ifdef __cplusplus
}
#endif
#endif
