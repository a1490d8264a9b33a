/*  cli/images.h — images given to prompt, run and chat (docs/images.md):
    each file read, put with blob.put for the session, and named in the
    prompt's `images` by its sha256. */
#ifndef SB_CLI_IMAGES_H
#define SB_CLI_IMAGES_H

#include <stdbool.h>
#include "bus/client.h"
#include "schemas/codec.h"

#define SB_CLI_IMAGES_MAX 16

/*  Takes every `--image FILE` (and `--image=FILE`) out of argv, keeping
    the rest in order (the taken ones move past the new *argc, so that
    each string is still in argv once): files [0..*n) point into argv. Returns 0, or 2
    (usage) with the reason printed when one has no FILE or there are
    more than SB_CLI_IMAGES_MAX. */
int sb_cli_take_images (const char *cmd, int *argc, char **argv, const char **files, int *n);

/*  Puts each file for session sid, then writes the key "images" and the
    array of {sha256, name} into the open map of e. Prints what went
    wrong (a file that cannot be read, a refused blob) and returns 1;
    0 on success (nothing written when n is 0). */
int sb_cli_put_images (const char *cmd, sb_bus_t *bus, const char *sid, const char *const *files, int n, sb_enc_t *e);

/*  The same, with the references blob.put answered (sha256, mime, bytes,
    width, height, name, sent): the `images` of run.request, for `run`. */
int sb_cli_put_refs (const char *cmd, sb_bus_t *bus, const char *sid, const char *const *files, int n, sb_enc_t *e);

/*  Puts one file for session sid: its reference in *reply's body (the
    caller destroys it). Returns 0, or 1 with the reason printed. */
int sb_cli_put_file (const char *cmd, sb_bus_t *bus, const char *sid, const char *file, sb_msg_t **reply);

/*  The files a terminal gathers for its next prompt (chat's /image). */
typedef struct {
    char *files [SB_CLI_IMAGES_MAX];    //  owned
    int n;
} sb_cli_images_t;

/*  One `/image` line's argument: PATH keeps a readable file, "clear"
    drops them all (and frees them). What to tell the person goes in said
    (when not NULL). */
void sb_cli_images_line (sb_cli_images_t *self, const char *arg, char *said, size_t said_len);

#endif
