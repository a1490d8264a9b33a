/*  schemas/errors.c — the error-code table. */
#include "schemas/errors.h"
#include <string.h>

static const struct {
    const char *name;
    bool retryable;
    const char *doc;
} s_errors [] = {
    { "ok", false, "no error" },
#define SB_ERR_ROW(name, retry, doc) { #name, retry, doc },
    SB_ERROR_TABLE (SB_ERR_ROW)
#undef SB_ERR_ROW
};

const char *
sb_err_name (sb_err_t code)
{
    return code < SB_E__COUNT ? s_errors [code].name : "internal";
}

bool
sb_err_retryable (sb_err_t code)
{
    return code < SB_E__COUNT ? s_errors [code].retryable : false;
}

const char *
sb_err_doc (sb_err_t code)
{
    return code < SB_E__COUNT ? s_errors [code].doc : "";
}

sb_err_t
sb_err_from_name (const char *name)
{
    for (int i = 1; i < SB_E__COUNT; i++)
        if (name && strcmp (s_errors [i].name, name) == 0)
            return (sb_err_t) i;
    return SB_E_internal;
}
