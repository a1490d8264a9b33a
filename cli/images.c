/*  cli/images.c — images for prompts from the command line
    (cli/images.h). */
#include "cli/images.h"
#include "cli/cli.h"
#include "schemas/types.h"

#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int
sb_cli_take_images (const char *cmd, int *argc, char **argv, const char **files, int *n)
{
    //  The taken arguments move to the end, behind the new argc: argv is
    //  permuted, never duplicated, as main frees each of its strings.
    char **order = calloc ((size_t) *argc + 1, sizeof *order);
    if (!order)
        return sb_cli_fail (cmd, "out of memory");
    int kept = 0, taken = 0, total = *argc;
    char **tail = order + total;
    *n = 0;
    for (int k = 0; k < total; k++) {
        const char *file = NULL;
        bool pair = false;
        if (strcmp (argv [k], "--") == 0) {
            //  everything after -- is the command's own
            while (k < total)
                order [kept++] = argv [k++];
            break;
        }
        if (strcmp (argv [k], "--image") == 0) {
            if (k + 1 >= total) {
                free (order);
                return sb_cli_usage (cmd, "--image needs a FILE");
            }
            file = argv [k + 1];
            pair = true;
        }
        else
        if (strncmp (argv [k], "--image=", 8) == 0)
            file = argv [k] + 8;
        if (!file) {
            order [kept++] = argv [k];
            continue;
        }
        if (*n >= SB_CLI_IMAGES_MAX) {
            free (order);
            return sb_cli_usage (cmd, "at most %d --image files a prompt", SB_CLI_IMAGES_MAX);
        }
        files [(*n)++] = file;
        *--tail = argv [k];
        taken++;
        if (pair) {
            *--tail = argv [++k];
            taken++;
        }
    }
    memcpy (argv, order, (size_t) kept * sizeof *argv);
    memcpy (argv + kept, tail, (size_t) taken * sizeof *argv);
    free (order);
    *argc = kept;
    return 0;
}

//  The whole file, at most SB_BLOB_BYTES_MAX bytes; NULL with the reason
//  printed.
static uint8_t *
s_read (const char *cmd, const char *file, size_t *len)
{
    FILE *f = fopen (file, "rb");
    struct stat st;
    if (!f || fstat (fileno (f), &st) || !S_ISREG (st.st_mode)) {
        sb_cli_fail (cmd, "cannot read %s: %s", file, f ? "not a regular file" : strerror (errno));
        if (f)
            fclose (f);
        return NULL;
    }
    if ((uint64_t) st.st_size > SB_BLOB_BYTES_MAX) {
        sb_cli_fail (cmd, "%s is %lld bytes; a blob is at most %u", file, (long long) st.st_size, SB_BLOB_BYTES_MAX);
        fclose (f);
        return NULL;
    }
    uint8_t *data = malloc ((size_t) st.st_size + 1);
    size_t got = data ? fread (data, 1, (size_t) st.st_size, f) : 0;
    fclose (f);
    if (!data || got != (size_t) st.st_size) {
        sb_cli_fail (cmd, "cannot read %s", file);
        free (data);
        return NULL;
    }
    *len = got;
    return data;
}

int
sb_cli_put_file (const char *cmd, sb_bus_t *bus, const char *sid, const char *file, sb_msg_t **reply)
{
    size_t len;
    uint8_t *data = s_read (cmd, file, &len);
    if (!data)
        return 1;
    char copy [4096];
    snprintf (copy, sizeof copy, "%s", file);
    sb_enc_t *e = sb_enc_new ();
    sb_enc_map_open (e);
    sb_enc_kstr (e, "session_id", sid);
    sb_enc_kstr (e, "name", basename (copy));
    sb_enc_key (e, "data");
    sb_enc_bin (e, data, len);
    sb_enc_map_close (e);
    free (data);
    size_t blen;
    const uint8_t *b = sb_enc_data (e, &blen);
    *reply = sb_cli_call (cmd, bus, "blob.put", b, blen, 60000);
    sb_enc_destroy (&e);
    return *reply ? 0 : 1;
}

//  Puts the files, then writes "images" with, for each, what refs wants:
//  {sha256, name} for session.prompt, or the whole reference for
//  run.request.
static int
s_put_all (const char *cmd, sb_bus_t *bus, const char *sid, const char *const *files, int n, sb_enc_t *e, bool refs)
{
    if (n == 0)
        return 0;
    sb_msg_t *replies [SB_CLI_IMAGES_MAX] = { NULL };
    int rc = 0;
    for (int k = 0; k < n && !rc; k++)
        rc = sb_cli_put_file (cmd, bus, sid, files [k], &replies [k]);
    if (!rc) {
        sb_enc_key (e, "images");
        sb_enc_array_open (e);
        for (int k = 0; k < n; k++) {
            const sb_val_t *blob = sb_get_map (replies [k]->body, "blob");
            if (refs) {
                sb_enc_val (e, blob);
                continue;
            }
            sb_enc_map_open (e);
            sb_enc_kstr (e, "sha256", sb_get_str (blob, "sha256"));
            sb_enc_kstr_opt (e, "name", sb_get_str (blob, "name"));
            sb_enc_map_close (e);
        }
        sb_enc_array_close (e);
    }
    for (int k = 0; k < n; k++)
        sb_msg_destroy (&replies [k]);
    return rc;
}

int
sb_cli_put_images (const char *cmd, sb_bus_t *bus, const char *sid, const char *const *files, int n, sb_enc_t *e)
{
    return s_put_all (cmd, bus, sid, files, n, e, false);
}

int
sb_cli_put_refs (const char *cmd, sb_bus_t *bus, const char *sid, const char *const *files, int n, sb_enc_t *e)
{
    return s_put_all (cmd, bus, sid, files, n, e, true);
}

void
sb_cli_images_line (sb_cli_images_t *self, const char *arg, char *said, size_t said_len)
{
    char dummy [8];
    if (!said) {
        said = dummy;
        said_len = sizeof dummy;
    }
    while (*arg == ' ')
        arg++;
    if (strcmp (arg, "clear") == 0) {
        for (int k = 0; k < self->n; k++)
            free (self->files [k]);
        self->n = 0;
        snprintf (said, said_len, "no images for the next prompt");
    }
    else
    if (!*arg || access (arg, R_OK) != 0)
        snprintf (said, said_len, "/image PATH: %s", *arg ? "cannot read that file" : "give the image file");
    else
    if (self->n >= SB_CLI_IMAGES_MAX || !(self->files [self->n] = strdup (arg)))
        snprintf (said, said_len, "at most %d images a prompt", SB_CLI_IMAGES_MAX);
    else {
        self->n++;
        snprintf (said, said_len, "%.400s goes with the next prompt (%d image%s)", arg, self->n, self->n == 1 ? "" : "s");
    }
}
