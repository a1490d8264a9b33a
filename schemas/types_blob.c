/*  schemas/types_blob.c — blob.* types (actors/blob.c) and the image
    reference the tape, run.request and llm.stream share (docs/images.md). */
#include "schemas/types.h"

#define IMAGE_FIELDS \
    { "sha256", SB_T_STR, true, 64, NULL, "the blob's sha256, 64 hex digits" }, \
    { "mime", SB_T_STR, true, 32, NULL, "its type, sniffed from the bytes: image/png, image/jpeg, image/gif, " \
      "image/webp, application/pdf, text/plain or application/octet-stream" }, \
    { "bytes", SB_T_UINT, true, 0, NULL, "its size", RANGE (0, SB_BLOB_BYTES_MAX, 0) }, \
    { "width", SB_T_UINT, false, 0, NULL, "images: pixels across", RANGE (0, 16384, 0) }, \
    { "height", SB_T_UINT, false, 0, NULL, "images: pixels down", RANGE (0, 16384, 0) }
static const sb_field_t s_sent [] = { IMAGE_FIELDS, END };
const sb_field_t sb_blob_ref_fields [] = {
    IMAGE_FIELDS,
    { "name", SB_T_STR, false, 256, NULL, "the file's name as given (not trusted for the type)" },
    { "sent", SB_T_MAP, false, 0, s_sent, "images over the models' limits: the downscaled copy models are sent" },
    END
};
static const sb_field_t s_blob_put [] = {
    { "session_id", SB_T_STR, true, ID_MAX, NULL, "the session that holds the blob (its quota, its readers)" },
    { "name", SB_T_STR, false, 256, NULL, "the file's name" },
    { "data", SB_T_BIN, true, SB_BLOB_BYTES_MAX, NULL, "the bytes (at most serve --blob-max)" },
    END
};
static const sb_field_t s_blob_one [] = {
    { "blob", SB_T_MAP, true, 0, sb_blob_ref_fields, "the stored blob" },
    END
};
static const sb_field_t s_blob_get [] = {
    { "session_id", SB_T_STR, true, ID_MAX, NULL, "a session that holds the blob" },
    { "sha256", SB_T_STR, true, 64, NULL, "the blob" },
    END
};
static const sb_field_t s_blob_get_ok [] = {
    { "blob", SB_T_MAP, true, 0, sb_blob_ref_fields, "what it is" },
    { "data", SB_T_BIN, true, SB_BLOB_BYTES_MAX, NULL, "its bytes" },
    END
};
static const sb_field_t s_blob_stats_ok [] = {
    { "blobs", SB_T_UINT, true, 0, NULL, "blobs stored", RANGE_COUNT },
    { "bytes", SB_T_UINT, true, 0, NULL, "their bytes", RANGE_COUNT },
    { "refused", SB_T_UINT, true, 0, NULL, "puts refused (caps, quotas, bad images)", RANGE_COUNT },
    { "swept", SB_T_UINT, true, 0, NULL, "blobs collected since start", RANGE_COUNT },
    END
};
static const sb_field_t s_none [] = { END };

const sb_type_t sb_types_blob [] = {
    { "blob.put", SB_KIND_REQUEST, SB_SCOPE_PUBLIC | SB_SCOPE_WORKER, s_blob_put, SB_BLOB_BYTES_MAX + 64 KB,
      "store a file for a session, once by its sha256 (images are checked, and downscaled for models)" },
    REP ("blob.put.ok", s_blob_one, "what was stored"),
    REQ ("blob.get", s_blob_get, SB_SCOPE_PUBLIC | SB_SCOPE_WORKER, "read a blob a session holds"),
    { "blob.get.ok", SB_KIND_REPLY, SB_SCOPE_PUBLIC, s_blob_get_ok, SB_BLOB_BYTES_MAX + 64 KB, "the blob" },
    REQ ("blob.stats", s_none, SB_SCOPE_PUBLIC, "the blob store's figures"),
    REP ("blob.stats.ok", s_blob_stats_ok, "the figures"),
};
const size_t sb_types_blob_count = sizeof sb_types_blob / sizeof sb_types_blob [0];
