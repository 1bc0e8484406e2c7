// The PNG fast path, for the files photo data sets hold: 8-bit gray, gray+alpha, RGB or RGBA, not
// interlaced, without tRNS. The chunks are walked and every CRC checked here; the IDAT data are
// inflated in one call by libdeflate (which checks the zlib stream's Adler-32) into the thread's
// scratch, and the rows unfiltered here straight into the output. libpng instead inflates through
// zlib a row at a time and runs each row through its transformation pipeline.
//
// Whatever this path does not decode exactly as libpng would — another layout, PLTE or tRNS, an
// unknown critical chunk, a chunk out of place, and every kind of damage (a bad CRC, truncation,
// a broken or short zlib stream, a bad filter byte) — is handed back undecoded (UIMG_PNG_DEFER),
// and libpng decodes it or names what is wrong. So the files accepted and the errors are libpng's;
// this path only ever succeeds on files libpng decodes to the same pixels (the tests compare both).

#include "image_io_internal.h"

#include <libdeflate.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

static uint32_t be32(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }

static int is_type(const uint8_t *type, const char *name) { return memcmp(type, name, 4) == 0; }

/// libpng's limit on a non-IDAT chunk (PNG_USER_CHUNK_MALLOC_MAX): longer ones are an error there.
#define CHUNK_LIMIT 8000000u

/// libpng's limit on an IDAT chunk's length (png_check_chunk_length) for a non-interlaced 8-bit image.
static uint64_t idat_limit(uint32_t width, uint32_t height, uint32_t channels) {
    uint64_t row_factor = (uint64_t)width * channels + 1;
    uint64_t limit = (uint64_t)height * row_factor;
    if (row_factor > 32566) row_factor = 32566;
    limit += 6 + 5 * (limit / row_factor + 1);
    if (limit > 0x7FFFFFFFu) limit = 0x7FFFFFFFu;
    return limit < CHUNK_LIMIT ? CHUNK_LIMIT : limit;
}

// MARK: - Unfiltering

/// Paeth's predictor: whichever of a (left), b (above), c (upper left) is closest to a + b - c,
/// preferring a, then b.
static inline uint8_t paeth(int a, int b, int c) {
    int pa = abs(b - c), pb = abs(a - c), pc = abs(a + b - 2 * c);
    return (uint8_t)(pa <= pb && pa <= pc ? a : pb <= pc ? b : c);
}

#if defined(__SSE2__)
// The vector paths (bpp 3 and 4) go one pixel per step with the left pixel in a register. Loads read 4
// bytes: for bpp 3 the fourth belongs to the next pixel, or past a row's end to the next row or the
// buffers' 16 bytes of padding, and is ignored; stores write only the pixel's bpp bytes.
static inline __m128i load4(const uint8_t *p) {
    uint32_t word;
    memcpy(&word, p, 4);
    return _mm_cvtsi32_si128((int)word);
}

static inline void store(uint8_t *p, __m128i v, size_t bpp) {
    const uint32_t word = (uint32_t)_mm_cvtsi128_si32(v);
    memcpy(p, &word, bpp);
}
#endif

/// Reverses one row's filter: `in` the filtered bytes, `prior` the previous output row (zeros for the
/// first), `out` this row's output; `n` bytes, `bpp` bytes per pixel (1...4). Returns 0, or -1 for an
/// unknown filter type.
/// Inlined into unfilter_row_bpp once per bpp, so every byte count is a constant.
static inline __attribute__((always_inline)) int unfilter_row(int filter, const uint8_t *in, const uint8_t *prior,
                                                               uint8_t *out, size_t n, size_t bpp) {
    switch (filter) {
    case 0:
        memcpy(out, in, n);
        return 0;
    case 1:
        for (size_t i = 0; i < bpp && i < n; i++) out[i] = in[i];
#if defined(__SSE2__)
        if (bpp == 3 || bpp == 4) {
            // The left pixel stays in a register (see Paeth below for the 4-byte loads and stores).
            __m128i a = load4(out);
            for (size_t i = bpp; i + bpp <= n; i += bpp) {
                a = _mm_add_epi8(a, load4(in + i));
                store(out + i, a, bpp);
            }
            return 0;
        }
#endif
        for (size_t i = bpp; i < n; i++) out[i] = (uint8_t)(in[i] + out[i - bpp]);
        return 0;
    case 2:
        for (size_t i = 0; i < n; i++) out[i] = (uint8_t)(in[i] + prior[i]);
        return 0;
    case 3:
        for (size_t i = 0; i < bpp && i < n; i++) out[i] = (uint8_t)(in[i] + (prior[i] >> 1));
#if defined(__SSE2__)
        if (bpp == 3 || bpp == 4) {
            // floor((a + b) / 2) in bytes: the rounded-up average less the bit the two odd halves add.
            const __m128i one = _mm_set1_epi8(1);
            __m128i a = load4(out);
            for (size_t i = bpp; i + bpp <= n; i += bpp) {
                const __m128i b = load4(prior + i);
                const __m128i average = _mm_sub_epi8(_mm_avg_epu8(a, b), _mm_and_si128(_mm_xor_si128(a, b), one));
                a = _mm_add_epi8(average, load4(in + i));
                store(out + i, a, bpp);
            }
            return 0;
        }
#endif
        for (size_t i = bpp; i < n; i++) out[i] = (uint8_t)(in[i] + ((out[i - bpp] + prior[i]) >> 1));
        return 0;
    case 4:
        for (size_t i = 0; i < bpp && i < n; i++) out[i] = (uint8_t)(in[i] + prior[i]);  // paeth(0, b, 0) = b
#if defined(__SSE2__)
        if (bpp == 3 || bpp == 4) {
            // One pixel per step in 16-bit lanes.
            const __m128i zero = _mm_setzero_si128();
            uint32_t word;
            memcpy(&word, out, 4);
            __m128i a = _mm_unpacklo_epi8(_mm_cvtsi32_si128((int)word), zero);
            memcpy(&word, prior, 4);
            __m128i c = _mm_unpacklo_epi8(_mm_cvtsi32_si128((int)word), zero);
            for (size_t i = bpp; i + bpp <= n; i += bpp) {
                memcpy(&word, prior + i, 4);
                const __m128i b = _mm_unpacklo_epi8(_mm_cvtsi32_si128((int)word), zero);
                const __m128i bc = _mm_sub_epi16(b, c), ac = _mm_sub_epi16(a, c);
                const __m128i pa = _mm_max_epi16(bc, _mm_sub_epi16(zero, bc));
                const __m128i pb = _mm_max_epi16(ac, _mm_sub_epi16(zero, ac));
                const __m128i sum = _mm_add_epi16(bc, ac);
                const __m128i pc = _mm_max_epi16(sum, _mm_sub_epi16(zero, sum));
                const __m128i smallest = _mm_min_epi16(_mm_min_epi16(pa, pb), pc);
                const __m128i use_b = _mm_cmpeq_epi16(pb, smallest), use_a = _mm_cmpeq_epi16(pa, smallest);
                __m128i predicted = _mm_or_si128(_mm_and_si128(use_b, b), _mm_andnot_si128(use_b, c));
                predicted = _mm_or_si128(_mm_and_si128(use_a, a), _mm_andnot_si128(use_a, predicted));
                memcpy(&word, in + i, 4);
                const __m128i result = _mm_add_epi8(_mm_packus_epi16(predicted, zero), _mm_cvtsi32_si128((int)word));
                const uint32_t bytes = (uint32_t)_mm_cvtsi128_si32(result);
                memcpy(out + i, &bytes, bpp);
                a = _mm_unpacklo_epi8(result, zero);
                c = b;
            }
            return 0;
        }
#endif
        for (size_t i = bpp; i < n; i++) out[i] = (uint8_t)(in[i] + paeth(out[i - bpp], prior[i], prior[i - bpp]));
        return 0;
    default:
        return -1;
    }
}

static int unfilter_row_bpp(int filter, const uint8_t *in, const uint8_t *prior, uint8_t *out, size_t n, size_t bpp) {
    switch (bpp) {
    case 1: return unfilter_row(filter, in, prior, out, n, 1);
    case 2: return unfilter_row(filter, in, prior, out, n, 2);
    case 3: return unfilter_row(filter, in, prior, out, n, 3);
    default: return unfilter_row(filter, in, prior, out, n, 4);
    }
}

// MARK: - Decoding

int uimg_decode_png_fast(const uint8_t *data, size_t size, uimg_scratch *scratch, int borrow, uimg_image *out,
                         char *error, size_t capacity) {
    // The signature and IHDR (length 13, CRC) were checked by the probe; the rest is checked here.
    if (size < 33 || memcmp(data + 12, "IHDR", 4) != 0 || be32(data + 8) != 13) return UIMG_PNG_DEFER;
    const uint8_t *ihdr = data + 16;
    const uint32_t width = be32(ihdr), height = be32(ihdr + 4);
    const uint8_t bit_depth = ihdr[8], color_type = ihdr[9];
    if (width == 0 || height == 0 || width > UIMG_MAX_DIMENSION || height > UIMG_MAX_DIMENSION) return UIMG_PNG_DEFER;
    if (bit_depth != 8 || ihdr[10] != 0 || ihdr[11] != 0 || ihdr[12] != 0) return UIMG_PNG_DEFER;
    uint32_t channels;
    switch (color_type) {
    case 0: channels = 1; break;
    case 2: channels = 3; break;
    case 4: channels = 2; break;
    case 6: channels = 4; break;
    default: return UIMG_PNG_DEFER;  // palette images go to libpng
    }
    if (libdeflate_crc32(0, data + 12, 17) != be32(data + 29)) return UIMG_PNG_DEFER;

    // Walk the chunks: consecutive IDATs, then IEND; ancillary chunks are skipped (libpng ignores
    // or only warns about them), any other critical chunk is libpng's to judge.
    const uint64_t idat_max = idat_limit(width, height, channels);
    const uint8_t *first_idat = NULL;
    size_t idat_bytes = 0, idat_chunks = 0, ancillary = 0;
    int idat_ended = 0;  // a non-IDAT chunk came after the IDATs
    size_t position = 33;
    for (;;) {
        if (size - position < 12) return UIMG_PNG_DEFER;  // truncated
        const uint32_t length = be32(data + position);
        const uint8_t *type = data + position + 4;
        if (length > 0x7FFFFFFFu || size - position - 12 < length) return UIMG_PNG_DEFER;
        for (int i = 0; i < 4; i++) {
            const uint8_t c = type[i];
            if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'))) return UIMG_PNG_DEFER;
        }
        if (libdeflate_crc32(0, type, (size_t)length + 4) != be32(type + 4 + length)) return UIMG_PNG_DEFER;
        if (is_type(type, "IDAT")) {
            if (idat_ended || length > idat_max) return UIMG_PNG_DEFER;
            if (first_idat == NULL) first_idat = type + 4;
            idat_bytes += length;
            idat_chunks++;
        } else if (is_type(type, "IEND")) {
            if (length != 0 || first_idat == NULL) return UIMG_PNG_DEFER;
            break;  // what follows IEND is never read, by libpng either
        } else {
            // Critical chunks (PLTE, a second IHDR, unknown ones) and tRNS are left to libpng, as are
            // chunks with the reserved bit set and more ancillary chunks than anyone writes.
            if (type[0] < 'a' || type[2] >= 'a' || is_type(type, "tRNS") || length > CHUNK_LIMIT || ++ancillary > 256) {
                return UIMG_PNG_DEFER;
            }
            if (first_idat != NULL) idat_ended = 1;
        }
        position += 12 + (size_t)length;
    }

    if (idat_bytes == 0) return UIMG_PNG_DEFER;  // no image data: libpng says what is missing

    // The IDAT data, contiguous: in place for a single chunk, else gathered into the scratch.
    const uint8_t *compressed = first_idat;
    if (idat_chunks > 1) {
        uint8_t *gathered = uimg_scratch_reserve(&scratch->idat, idat_bytes);
        if (gathered == NULL) goto out_of_memory;
        size_t done = 0;
        for (size_t p = 33;;) {
            const uint32_t length = be32(data + p);
            if (is_type(data + p + 4, "IDAT")) {
                memcpy(gathered + done, data + p + 8, length);
                done += length;
                if (done == idat_bytes) break;
            }
            p += 12 + (size_t)length;
        }
        compressed = gathered;
    }

    // Inflate every row (a filter byte, then width * channels bytes) at once. The buffers carry 16
    // bytes of padding, which the vector Paeth's 4-byte loads may read past a row's end, and the
    // rows are unfiltered straight into the output.
    const size_t row_bytes = (size_t)width * channels;
    const size_t raw_size = (row_bytes + 1) * height;
    size_t pixel_bytes = 0;
    if (uimg_image_bytes(width, height, channels, &pixel_bytes, error, capacity) != UIMG_OK) return UIMG_PNG_DEFER;
    if (scratch->inflater == NULL) {
        scratch->inflater = libdeflate_alloc_decompressor();
        if (scratch->inflater == NULL) goto out_of_memory;
    }
    // After the rows: 16 bytes of padding, then a padded row of zeros, the first row's prior row.
    uint8_t *raw = uimg_scratch_reserve(&scratch->raw, raw_size + row_bytes + 32);
    if (raw == NULL) goto out_of_memory;
    size_t consumed = 0;
    const enum libdeflate_result inflated = libdeflate_zlib_decompress_ex(scratch->inflater, compressed, idat_bytes, raw,
                                                                          raw_size, &consumed, NULL);
    if (inflated != LIBDEFLATE_SUCCESS || consumed != idat_bytes) return UIMG_PNG_DEFER;
    memset(raw + raw_size, 0, row_bytes + 32);
    const uint8_t *zeros = raw + raw_size + 16;

    uint8_t *pixels = borrow ? uimg_scratch_reserve(&scratch->pixels, pixel_bytes + 16) : malloc(pixel_bytes + 16);
    if (pixels == NULL) goto out_of_memory;
    for (uint32_t y = 0; y < height; y++) {
        const uint8_t *in = raw + (size_t)y * (row_bytes + 1);
        uint8_t *row = pixels + (size_t)y * row_bytes;
        const uint8_t *prior = y == 0 ? zeros : row - row_bytes;
        if (unfilter_row_bpp(in[0], in + 1, prior, row, row_bytes, channels) != 0) {
            if (!borrow) free(pixels);
            return UIMG_PNG_DEFER;  // libpng: "bad adaptive filter value"
        }
    }

    return uimg_finish(out, pixels, width, height, channels, UIMG_FORMAT_PNG, channels == 2 || channels == 4, 1);

out_of_memory:
    return uimg_fail(error, capacity, UIMG_ERR_MEMORY, "out of memory for a %ux%u PNG", width, height);
}
