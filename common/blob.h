/*  common/blob.h — the blob store: images and artifacts, stored once by
    their sha256, as files in DATA/blobs, outside the store (docs/images.md).

    Layout:
      DATA/blobs/ab/cdef...          the bytes of the blob whose sha256 is
                                     abcdef... (64 hex digits in all)
      DATA/blobs/ab/cdef....sent     a downscaled image: the hex of the
                                     variant sent to models instead (64
                                     hex digits, written atomically too)
      DATA/blobs/refs/SESSION_ID     the blobs a session holds, one line
                                     "HEX BYTES MIME WIDTH HEIGHT\n" each (appended when a
                                     blob is put for it): the session's
                                     quota, what session.prompt and
                                     blob.get may name, and the sweep's
                                     roots
      DATA/blobs/tmp/                blobs being written

    A blob is written to tmp/, fsynced, renamed into place, and its folder
    fsynced: a reader (and a reference) only ever sees a whole blob; a
    writer killed half way leaves a file in tmp/, which sb_blobs_open
    removes. A blob is referenced (its refs line written) only after its
    rename, so no reference names a half blob.

    Collection is a sweep (sb_blobs_sweep): every blob that no refs file
    names is removed; deleting a session removes its refs file. The sweep
    runs at start and after each delete; refcounts in the store would
    couple every tape write to the blob files for no gain, since blobs
    only die with their session.

    Not thread-safe: one owner (the blob actor) writes; other threads
    only read blobs by hash (sb_blob_read), which the rename makes safe. */
#ifndef SB_BLOB_H
#define SB_BLOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SB_BLOB_HEX          64
#define SB_BLOB_MAX_DEFAULT  (24u << 20)        //  one blob
#define SB_BLOB_SESSION_QUOTA_DEFAULT (256ull << 20)
#define SB_BLOB_TOTAL_QUOTA_DEFAULT   (4ull << 30)
//  An image is checked as an image before anything sends it on:
//  dimensions within SB_IMAGE_SIDE_MAX and a decoded size (4 bytes a
//  pixel) within SB_IMAGE_PIXELS_MAX, so decoding one can never take more
//  than 256 MiB.
#define SB_IMAGE_SIDE_MAX    16384
#define SB_IMAGE_PIXELS_MAX  (64u << 20)

//  What models are sent: the strictest of the providers' limits
//  (Anthropic: 5 MB of base64 an image and 8000 px; OpenAI: 2048 px on the
//  longest side before its own resize). A larger image is sent downscaled.
#define SB_IMAGE_SEND_SIDE   2048
#define SB_IMAGE_SEND_BYTES  (3750u * 1024)

typedef struct {
    char sha256 [SB_BLOB_HEX + 1];
    char mime [32];             //  sniffed from the bytes
    uint64_t bytes;
    uint32_t width, height;     //  images: their dimensions; else 0
} sb_blob_info_t;

/*  Sniffs the mime type from the bytes (never the name): image/png,
    image/jpeg, image/gif, image/webp, application/pdf, text/plain (UTF-8
    without NUL or other control bytes than tab, CR, LF, FF, ESC) or
    application/octet-stream; fills width and height for images. Reads at
    most `len` bytes and allocates nothing. Returns 0, or -1 with a
    reason in err for an image whose header is cut short or whose
    dimensions are out of bounds (an image that is not one is refused
    here, before anything decodes it). */
int sb_blob_sniff (const uint8_t *data, size_t len, sb_blob_info_t *info, char *err, size_t errlen);

//  Whether mime is an image type sb_blob_sniff gives.
bool sb_blob_is_image (const char *mime);

//  Whether s is 64 lowercase hex digits.
bool sb_blob_hex_ok (const char *s);

typedef struct sb_blobs sb_blobs_t;

/*  Opens (creates) DATA/blobs under data_dir, removes what tmp/ holds,
    and counts what is stored. NULL with a reason in err. */
sb_blobs_t *sb_blobs_open (const char *data_dir, char *err, size_t errlen);
void sb_blobs_destroy (sb_blobs_t **self_p);
//  Caps: 0 keeps the default.
void sb_blobs_set_limits (sb_blobs_t *self, uint64_t blob_max, uint64_t session_quota, uint64_t total_quota);

/*  Stores data for session sid (a checked id): sniffs it, checks the caps
    and quotas, writes it once (the same content is stored once, and
    counted once against a session that puts it twice), and references it
    from the session. Returns 0 with info filled, or -1 with a reason in
    err and *code: "too_large" (over the blob cap or a quota), "invalid"
    (a bad image) or "internal" (the disk). */
int sb_blobs_put (sb_blobs_t *self, const char *sid, const uint8_t *data, size_t len, sb_blob_info_t *info,
                  const char **code, char *err, size_t errlen);

/*  Whether session sid references blob hex (in blob_dir, DATA/blobs);
    fills info as the blob was sniffed when it was put (its refs line).
    Any thread: it reads the refs file only. */
bool sb_blob_held (const char *blob_dir, const char *sid, const char *hex, sb_blob_info_t *info);

//  Records that `sent` is what models get instead of `orig`.
int sb_blobs_set_sent (sb_blobs_t *self, const char *orig, const char *sent);
//  The variant recorded for orig, into out (65 bytes); false when none.
//  blob_dir: DATA/blobs (sb_blobs_dir).
bool sb_blobs_sent_of (const char *blob_dir, const char *orig, char out [SB_BLOB_HEX + 1]);
//  DATA/blobs.
const char *sb_blobs_dir (sb_blobs_t *self);

//  Removes a deleted session's refs file (the session service, any
//  thread); the blob service's next sweep collects what it alone held.
void sb_blob_unhold (const char *blob_dir, const char *sid);
//  Forgets a deleted session (its refs file), then sweeps.
void sb_blobs_forget (sb_blobs_t *self, const char *sid);
/*  Removes every blob no refs file names. Returns the number removed. */
size_t sb_blobs_sweep (sb_blobs_t *self);

//  Figures for stats and /metrics.
void sb_blobs_totals (sb_blobs_t *self, uint64_t *count, uint64_t *bytes, uint64_t *refused);
//  The same of the process's store, from any thread (bus.stats's "blobs";
//  0 when no store is open), with the blobs swept since start.
void sb_blob_figures (uint64_t *count, uint64_t *bytes, uint64_t *refused, uint64_t *swept);
//  The bytes session sid holds.
uint64_t sb_blobs_session_bytes (sb_blobs_t *self, const char *sid);

/*  The next `size` bytes of fd, all of them: a new buffer, or NULL (errno
    EIO when the file ends before, ENOMEM). */
uint8_t *sb_blob_read_fd (int fd, size_t size);

/*  Reads blob hex from blob_dir, DATA/blobs (any thread): a new buffer of *len
    bytes, checked against its hash; NULL (errno ENOENT, EFBIG past max,
    EIO on a hash mismatch). The caller frees it. */
uint8_t *sb_blob_read (const char *blob_dir, const char *hex, size_t max, size_t *len);

#endif
