/*  actors/exec/mcp_sample.h — MCP sampling (docs/mcp.md, "Sampling"): a
    server's `sampling/createMessage` asks the client for one model call.

    It is answered only for a session that allows it (its record's
    `mcp_sampling`); the client then declares the `sampling` capability at
    initialize, and a request goes to the set's sampler (the run's,
    actors/exec/mcp_sampling.c: a person approves, the llm actor answers).
    Everywhere else it is refused as not supported.

    What the server sends is checked and bounded before anything is shown
    or asked: text messages of the roles user and assistant, image
    messages of the user (base64 data and mimeType: decoded within
    bounds, sniffed, its dimensions checked as every image is, and
    downscaled to what models take, common/blob.h), a system
    prompt, maxTokens, modelPreferences (its hints are shown to the person;
    the session's own provider and model answer), temperature,
    includeContext (nothing of the session is ever added: "none" is what
    every value gets), stopSequences and metadata (checked, not used).
    Audio is refused, saying so.
*/
#ifndef SB_EXEC_MCP_SAMPLE_H
#define SB_EXEC_MCP_SAMPLE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SB_MCP_SAMPLE_MESSAGES_MAX  64              //  messages of a request
#define SB_MCP_SAMPLE_TEXT_MAX      (256 * 1024)    //  bytes of text, all messages and the system prompt
#define SB_MCP_SAMPLE_TOKENS_MAX    16384           //  maxTokens, 1 to this
#define SB_MCP_SAMPLE_HINTS_MAX     8               //  modelPreferences.hints
#define SB_MCP_SAMPLE_NAME_MAX      128             //  bytes of a hint's name
#define SB_MCP_SAMPLE_STOPS_MAX     16              //  stopSequences, each of at most NAME_MAX bytes
#define SB_MCP_SAMPLE_IMAGES_MAX    4               //  image messages of a request
#define SB_MCP_SAMPLE_IMAGE_MAX     (6u << 20)      //  decoded bytes of all its images (what 8 MiB of base64 holds)

//  The JSON-RPC error a server gets when the person rejects its request
//  (the specification's example: -1, "User rejected sampling request").
#define SB_MCP_SAMPLE_REJECTED_CODE -1

//  An image a server sent, as the model gets it: sniffed, and downscaled
//  when it was over SB_IMAGE_SEND_SIDE or SB_IMAGE_SEND_BYTES.
typedef struct {
    uint8_t *data;              //  malloc'd (sb_mcp_sample_clear)
    size_t len;
    char mime [32];             //  what the model gets: sniffed, or image/jpeg when downscaled
    uint32_t width, height;
    //  What the server sent (its mimeType, checked against the bytes).
    char sent_mime [32];
    uint32_t sent_width, sent_height;
    size_t sent_bytes;
} sb_mcp_sample_image_t;

//  One checked request: pointers into the params it was read from, and
//  the images it decoded (sb_mcp_sample_clear frees them).
typedef struct {
    const char *system;         //  NULL: none
    //  text: the message's text; image: "" and the image.
    struct { const char *role, *text; sb_mcp_sample_image_t *image; } messages [SB_MCP_SAMPLE_MESSAGES_MAX];
    size_t n;
    sb_mcp_sample_image_t images [SB_MCP_SAMPLE_IMAGES_MAX];
    size_t nimages;
    uint64_t max_tokens;
    bool has_temperature;
    double temperature;         //  0 to 2
    const char *hints [SB_MCP_SAMPLE_HINTS_MAX];
    size_t nhints;
} sb_mcp_sample_t;

//  What the sampler answers: done (text, model, stop_reason), rejected by
//  the person, or failed (why, for the server).
typedef enum { SB_MCP_SAMPLE_DONE, SB_MCP_SAMPLE_REJECTED, SB_MCP_SAMPLE_FAILED } sb_mcp_sample_outcome_t;

typedef struct {
    char *text;                 //  DONE: the model's text (malloc'd)
    char model [129];           //  DONE: the model that answered
    char stop_reason [32];      //  DONE: endTurn | maxTokens | ...
    char error [256];           //  REJECTED, FAILED: why, for the server
} sb_mcp_sample_reply_t;

/*  The sampler: asked the checked request `req` of the server `server`,
    fills reply and returns the outcome. Runs on the thread of the
    exchange during which the request came (the run's).                    */
typedef sb_mcp_sample_outcome_t (sb_mcp_sampler_fn) (void *arg, const char *server, const sb_mcp_sample_t *req,
                                                   sb_mcp_sample_reply_t *reply);

//  0 when `params` is a request the client takes, filled into *req (its
//  strings point into params); else -1 with why in err. Either way the
//  caller calls sb_mcp_sample_clear after.
int sb_mcp_sample_parse (json_t *params, sb_mcp_sample_t *req, char *err, size_t errlen);

//  Frees the images of a parsed request.
void sb_mcp_sample_clear (sb_mcp_sample_t *req);

/*  The JSON-RPC result (or error) to the server's sampling/createMessage
    `m`, through `fn`; NULL fn: refused as not supported.                 */
json_t *sb_mcp_sample_answer (json_t *m, const char *server, sb_mcp_sampler_fn *fn, void *arg);

#endif
