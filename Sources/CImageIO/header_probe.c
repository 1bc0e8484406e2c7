// Reading what an image declares (size, channels, progressive or not) without decoding it, so the
// pixel cap is applied before libpng or libjpeg allocate anything, and opening files so that only
// regular files are read: a FIFO, a device or a folder named like an image is refused at once.

#include "image_io_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/// Reads `count` bytes at `offset` into `out`; returns the number read (short at the end).
typedef size_t (*probe_read)(void *source, uint64_t offset, uint8_t *out, size_t count);

typedef struct {
    const uint8_t *data;
    size_t size;
} memory_source;

static size_t read_memory(void *source, uint64_t offset, uint8_t *out, size_t count) {
    const memory_source *m = source;
    if (offset >= m->size) return 0;
    size_t n = m->size - (size_t)offset < count ? m->size - (size_t)offset : count;
    memcpy(out, m->data + offset, n);
    return n;
}

static size_t read_fd(void *source, uint64_t offset, uint8_t *out, size_t count) {
    const int fd = *(const int *)source;
    size_t done = 0;
    while (done < count) {
        ssize_t got = pread(fd, out + done, count - done, (off_t)(offset + done));
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        done += (size_t)got;
    }
    return done;
}

static uint32_t be16(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }
static uint32_t be32(const uint8_t *p) { return be16(p) << 16 | be16(p + 2); }

/// PNG's CRC-32 (the zlib polynomial), bitwise: it runs over 17 bytes per file.
static uint32_t png_crc(const uint8_t *data, size_t size) {
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < size; i++) {
        crc ^= data[i];
        for (int k = 0; k < 8; k++) crc = crc & 1 ? (crc >> 1) ^ 0xEDB88320u : crc >> 1;
    }
    return crc ^ 0xFFFFFFFFu;
}

static int probe_png(probe_read read, void *source, uimg_header *out, char *error, size_t capacity) {
    uint8_t head[33];
    if (read(source, 0, head, sizeof head) < sizeof head) {
        return uimg_fail(error, capacity, UIMG_ERR_CORRUPT, "invalid PNG data: truncated before the end of IHDR");
    }
    if (be32(head + 8) != 13 || memcmp(head + 12, "IHDR", 4) != 0) {
        return uimg_fail(error, capacity, UIMG_ERR_CORRUPT, "invalid PNG data: the first chunk is not IHDR");
    }
    if (png_crc(head + 12, 17) != be32(head + 29)) {
        return uimg_fail(error, capacity, UIMG_ERR_CORRUPT, "invalid PNG data: IHDR CRC error");
    }
    if (be32(head + 16) > 0x7FFFFFFFu || be32(head + 20) > 0x7FFFFFFFu) {
        return uimg_fail(error, capacity, UIMG_ERR_CORRUPT, "invalid PNG data: image size out of range");
    }
    out->width = be32(head + 16);
    out->height = be32(head + 20);
    switch (head[25]) {
    case 0: out->channels = 1; break;
    case 2: out->channels = 3; break;
    case 3: out->channels = 4; break;  // a palette may carry alpha (tRNS): expands to RGBA at most
    case 4: out->channels = 2; break;
    case 6: out->channels = 4; break;
    default:
        return uimg_fail(error, capacity, UIMG_ERR_CORRUPT, "invalid PNG data: unknown color type %u", head[25]);
    }
    out->progressive = head[28] != 0;
    return UIMG_OK;
}

static int probe_jpeg(probe_read read, void *source, uimg_header *out, char *error, size_t capacity) {
    uint64_t offset = 2;  // after SOI
    // Each step moves forward by at least 2 bytes; a file has at most 2^30 of them (checked by callers
    // that read files; memory is bounded by its size), so the walk ends.
    for (int segments = 0; segments < 1 << 20; segments++) {
        uint8_t marker[4];
        if (read(source, offset, marker, 2) < 2) break;
        if (marker[0] != 0xFF) {
            return uimg_fail(error, capacity, UIMG_ERR_CORRUPT, "invalid JPEG data: no marker at byte %llu",
                             (unsigned long long)offset);
        }
        if (marker[1] == 0xFF) { offset += 1; continue; }  // fill byte
        const uint8_t code = marker[1];
        offset += 2;
        if (code == 0xD8 || (code >= 0xD0 && code <= 0xD7) || code == 0x01) continue;  // no length
        if (code == 0xD9 || code == 0xDA) break;  // EOI or SOS before any frame header
        uint8_t length_bytes[2];
        if (read(source, offset, length_bytes, 2) < 2) break;
        const uint32_t length = be16(length_bytes);
        if (length < 2) {
            return uimg_fail(error, capacity, UIMG_ERR_CORRUPT, "invalid JPEG data: segment length %u at byte %llu",
                             length, (unsigned long long)offset);
        }
        const int is_frame = code >= 0xC0 && code <= 0xCF && code != 0xC4 && code != 0xC8 && code != 0xCC;
        if (is_frame) {
            uint8_t frame[6];
            if (length < 8 || read(source, offset + 2, frame, 6) < 6) break;
            out->height = be16(frame + 1);
            out->width = be16(frame + 3);
            out->channels = frame[5] == 1 ? 1 : frame[5];
            out->progressive = code == 0xC2 || code == 0xC6 || code == 0xCA || code == 0xCE;
            if (out->channels != 1 && out->channels != 3 && out->channels != 4) {
                return uimg_fail(error, capacity, UIMG_ERR_CORRUPT, "invalid JPEG data: %u components", frame[5]);
            }
            return UIMG_OK;
        }
        offset += length;
    }
    return uimg_fail(error, capacity, UIMG_ERR_CORRUPT, "invalid JPEG data: no frame header (SOF) before the image data");
}

/// Probes through `read` and checks the result against the limits.
static int probe(probe_read read, void *source, uint64_t max_pixels, uimg_header *out, char *error,
                 size_t capacity) {
    memset(out, 0, sizeof *out);
    uint8_t head[8];
    const size_t got = read(source, 0, head, sizeof head);
    if (got == 0) return uimg_fail(error, capacity, UIMG_ERR_CORRUPT, "empty file (0 bytes)");
    int status;
    switch (uimg_detect_format(head, got)) {
    case UIMG_FORMAT_PNG:
        out->format = UIMG_FORMAT_PNG;
        status = probe_png(read, source, out, error, capacity);
        break;
    case UIMG_FORMAT_JPEG:
        out->format = UIMG_FORMAT_JPEG;
        status = probe_jpeg(read, source, out, error, capacity);
        break;
    default:
        return uimg_unsupported_format(head, got, error, capacity);
    }
    if (status != UIMG_OK) return status;
    if (out->width == 0 || out->height == 0) {
        return uimg_fail(error, capacity, UIMG_ERR_CORRUPT, "image has no pixels (%ux%u)", out->width, out->height);
    }
    if (out->width > UIMG_MAX_DIMENSION || out->height > UIMG_MAX_DIMENSION) {
        return uimg_fail(error, capacity, UIMG_ERR_TOO_LARGE, "image is %ux%u; the largest side accepted is %u pixels",
                         out->width, out->height, UIMG_MAX_DIMENSION);
    }
    const uint64_t cap = max_pixels == 0 ? UIMG_DEFAULT_MAX_PIXELS : max_pixels;
    const uint64_t pixels = (uint64_t)out->width * out->height;
    if (pixels > cap) {
        return uimg_fail(error, capacity, UIMG_ERR_TOO_LARGE,
                         "image declares %ux%u = %llu pixels, over the cap of %llu (a decompression bomb?)",
                         out->width, out->height, (unsigned long long)pixels, (unsigned long long)cap);
    }
    return UIMG_OK;
}

int uimg_probe_memory(const uint8_t *data, size_t size, uint64_t max_pixels, uimg_header *out, char *error,
                      size_t capacity) {
    if (out == NULL) return uimg_fail(error, capacity, UIMG_ERR_ARGUMENT, "no output header given");
    memory_source source = {data, data == NULL ? 0 : size};
    return probe(read_memory, &source, max_pixels, out, error, capacity);
}

int uimg_open_regular(const char *path, uint64_t *size, char *error, size_t capacity) {
    if (path == NULL) return -uimg_fail(error, capacity, UIMG_ERR_ARGUMENT, "no path given");
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
    int fd;
    do { fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY); } while (fd < 0 && errno == EINTR);
    if (fd < 0) return -uimg_fail(error, capacity, UIMG_ERR_IO, "cannot open: %s", strerror(errno));
    struct stat info;
    if (fstat(fd, &info) != 0) {
        const int saved = errno;
        close(fd);
        return -uimg_fail(error, capacity, UIMG_ERR_IO, "cannot stat: %s", strerror(saved));
    }
    if (!S_ISREG(info.st_mode)) {
        const char *what = S_ISFIFO(info.st_mode) ? "a FIFO" : S_ISCHR(info.st_mode) ? "a character device"
                         : S_ISBLK(info.st_mode) ? "a block device" : S_ISDIR(info.st_mode) ? "a folder"
                         : S_ISSOCK(info.st_mode) ? "a socket" : "not a regular file";
        close(fd);
        return -uimg_fail(error, capacity, UIMG_ERR_IO, "not a regular file (it is %s); only regular files are read", what);
    }
    *size = (uint64_t)info.st_size;
    return fd;
}

int uimg_probe_descriptor(int fd, uint64_t max_pixels, uimg_header *out, char *error, size_t capacity) {
    return probe(read_fd, &fd, max_pixels, out, error, capacity);
}

int uimg_probe_file(const char *path, uint64_t max_pixels, uimg_header *out, char *error, size_t capacity) {
    if (out == NULL) return uimg_fail(error, capacity, UIMG_ERR_ARGUMENT, "no output header given");
    memset(out, 0, sizeof *out);
    uint64_t size = 0;
    int fd = uimg_open_regular(path, &size, error, capacity);
    if (fd < 0) return -fd;
    int status = probe(read_fd, &fd, max_pixels, out, error, capacity);
    close(fd);
    return status;
}
