/*  actors/exec/mcp_sampling.c — a run's answer to an MCP server's
    sampling/createMessage (docs/mcp.md, "Sampling"), for a session whose
    record allows it (`mcp_sampling`): a person approves the request, then
    the session's provider and model answer it through the llm actor, as a
    one-off call of the run (its usage entry counts against the budgets).

    Runs on the run's thread, inside the tool call during which the server
    asked (the MCP client answers a server's requests as they come).
*/
#include "actors/exec/agent.h"
#include "actors/exec/approval.h"
#include "actors/exec/mcp_sample.h"
#include "actors/exec/stream.h"
#include "common/log.h"
#include "schemas/interaction.h"
#include "schemas/vocab.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ACTOR "exec"

//  Bytes of the newest message the summary shows (the arguments hold all).
#define S_SHOWN_MAX 300

//  What the person is shown: the server, the bounds, the model's hints
//  and the newest message (cut on a UTF-8 boundary); the whole request in
//  the arguments. Returns 0, or -1 out of memory.
static int
s_describe (const char *server, const sb_mcp_sample_t *req, char **arguments, char *summary, size_t size)
{
    json_t *msgs = json_array ();
    for (size_t k = 0; msgs && k < req->n; k++) {
        const sb_mcp_sample_image_t *im = req->messages [k].image;
        json_array_append_new (msgs, im ? json_pack ("{s:s, s:{s:s, s:i, s:i, s:I}}", "role", req->messages [k].role,
                                                     "image", "mimeType", im->sent_mime, "width", (int) im->sent_width,
                                                     "height", (int) im->sent_height, "bytes",
                                                     (json_int_t) im->sent_bytes)
                                        : json_pack ("{s:s, s:s}", "role", req->messages [k].role, "text",
                                                     req->messages [k].text));
    }
    json_t *hints = json_array ();
    char shown_hints [256] = "";
    for (size_t k = 0; hints && k < req->nhints; k++) {
        json_array_append_new (hints, json_string (req->hints [k]));
        size_t used = strlen (shown_hints);
        snprintf (shown_hints + used, sizeof shown_hints - used, "%s%.40s", k ? ", " : "", req->hints [k]);
    }
    json_t *a = json_pack ("{s:s, s:o, s:I, s:o}", "server", server, "messages", msgs, "maxTokens",
                           (json_int_t) req->max_tokens, "modelHints", hints);
    if (a && req->system)
        json_object_set_new (a, "systemPrompt", json_string (req->system));
    *arguments = a ? json_dumps (a, JSON_COMPACT) : NULL;
    json_decref (a);
    if (!*arguments)
        return -1;
    //  An image is shown by what it is (the UI does not render it here).
    char image [192];
    const sb_mcp_sample_image_t *im = req->messages [req->n - 1].image;
    if (im)
        snprintf (image, sizeof image, "[an image: %s %ux%u, %zu bytes]%s", im->sent_mime, im->sent_width,
                  im->sent_height, im->sent_bytes, im->width != im->sent_width ? " (sent downscaled)" : "");
    const char *last = im ? image : req->messages [req->n - 1].text;
    size_t n = strlen (last);
    if (n > S_SHOWN_MAX) {
        n = S_SHOWN_MAX;
        while (n > 0 && ((unsigned char) last [n] & 0xC0) == 0x80)
            n--;
    }
    char images [48] = "";
    if (req->nimages)
        snprintf (images, sizeof images, ", %zu of them image%s", req->nimages, req->nimages == 1 ? "" : "s");
    snprintf (summary, size, "the MCP server %s asks the session's model for an answer of at most %llu tokens%s%s%s "
              "(%zu message%s%s%s); the newest: %.*s%s", server, (unsigned long long) req->max_tokens,
              req->nhints ? " (it would like: " : "", shown_hints, req->nhints ? ")" : "", req->n,
              req->n == 1 ? "" : "s", images, req->system ? " and a system prompt" : "", (int) n, last,
              n < strlen (last) ? " ..." : "");
    return 0;
}

//  Asks the person. Returns DONE when they approved, else the outcome
//  with why in reply->error.
static sb_mcp_sample_outcome_t
s_approve (sb_exec_run_t *run, const char *server, const sb_mcp_sample_t *req, sb_mcp_sample_reply_t *reply)
{
    char *arguments = NULL;
    char summary [1024];
    if (s_describe (server, req, &arguments, summary, sizeof summary) != 0) {
        snprintf (reply->error, sizeof reply->error, "out of memory");
        return SB_MCP_SAMPLE_FAILED;
    }
    //  (run_id, call_id) names the interaction: the same after a restart
    char call_id [64];
    snprintf (call_id, sizeof call_id, "sampling-%u", ++run->samplings);
    sb_sub_t *sub = sb_exec_ask_subscribe (run);
    sb_enc_t *e = sb_exec_ask_request (run, call_id, SB_EXEC_SAMPLING_TOOL);
    sb_enc_kstr (e, "arguments", arguments);
    sb_enc_kstr (e, "summary", summary);
    sb_enc_kstr (e, "risk", "medium");
    int64_t deadline = sb_exec_approval_deadline (run);
    if (deadline >= 0)
        sb_enc_kuint (e, "deadline_s", (uint64_t) deadline);
    sb_enc_map_close (e);
    free (arguments);
    sb_exec_answer_t o = { { 0 } };
    sb_ask_t asked = sb_exec_ask (run, e, sub, SB_PHASE_WAITING_APPROVAL, &o);
    sb_enc_destroy (&e);
    sb_sub_destroy (&sub);
    sb_mcp_sample_outcome_t outcome = SB_MCP_SAMPLE_FAILED;
    if (asked == SB_ASK_FAILED)
        snprintf (reply->error, sizeof reply->error, "no person could be asked to approve it (%s: %s)",
                  sb_err_name (o.code), o.error);
    else
    if (asked != SB_ASK_RESOLVED)
        snprintf (reply->error, sizeof reply->error, "the run ended while a person was asked");
    else
    if (sb_ia_decision_from_name (o.decision) == IA_APPROVE)
        outcome = SB_MCP_SAMPLE_DONE;
    else {
        outcome = SB_MCP_SAMPLE_REJECTED;
        snprintf (reply->error, sizeof reply->error, "User rejected sampling request%s",
                  sb_ia_status_from_name (o.status) == IA_EXPIRED ? " (nobody answered before the deadline)" : "");
    }
    sb_info (ACTOR, "mcp sampling run=%s server=%s interaction=%s: %s", run->run_id, server, o.interaction_id,
             outcome == SB_MCP_SAMPLE_DONE ? "approved" : reply->error);
    sb_exec_answer_clear (&o);
    return outcome;
}

//  The llm.stream request: the server's messages as they are, nothing of
//  the session's own conversation.
static sb_enc_t *
s_request (const sb_runtime_t *rt, const sb_mcp_sample_t *req)
{
    sb_enc_t *e = sb_enc_new ();
    sb_enc_map_open (e);
    if (rt->provider) sb_enc_kstr (e, "provider", rt->provider);
    if (rt->model) sb_enc_kstr (e, "model", rt->model);
    if (req->system)
        sb_enc_kstr (e, "instructions", req->system);
    sb_enc_key (e, "messages");
    sb_enc_array_open (e);
    for (size_t k = 0; k < req->n; k++) {
        sb_enc_map_open (e);
        sb_enc_kstr (e, "role", req->messages [k].role);
        sb_enc_kstr (e, "content", req->messages [k].text);
        //  As a person's images go (actors/exec/context.c).
        const sb_mcp_sample_image_t *im = req->messages [k].image;
        if (im) {
            sb_enc_key (e, "images");
            sb_enc_array_open (e);
            sb_enc_map_open (e);
            sb_enc_kstr (e, "mime", im->mime);
            sb_enc_key (e, "data");
            sb_enc_bin (e, im->data, im->len);
            sb_enc_map_close (e);
            sb_enc_array_close (e);
        }
        sb_enc_map_close (e);
    }
    sb_enc_array_close (e);
    sb_enc_key (e, "options");
    sb_enc_map_open (e);
    uint64_t cap = rt->max_output_tokens && rt->max_output_tokens < req->max_tokens ? rt->max_output_tokens
                                                                                   : req->max_tokens;
    sb_enc_kuint (e, "max_output_tokens", cap);
    if (req->has_temperature)
    {
        sb_enc_key (e, "temperature");
        sb_enc_float (e, req->temperature);
    }
    sb_enc_map_close (e);
    sb_enc_map_close (e);
    return e;
}

//  The call's usage entry, counted like any model call of the run.
static void
s_account (sb_exec_run_t *run, const char *server, const sb_exec_text_usage_t *usage)
{
    atomic_fetch_add (&run->steps, 1);
    sb_enc_t *e = sb_enc_new ();
    sb_enc_array_open (e);
    sb_exec_entry_open (e, "usage");
    if (usage->known)
        sb_exec_usage_encode (&usage->call, e);
    sb_enc_kuint (e, "context_tokens", usage->context);
    sb_enc_kuint (e, "context_window", run->runtime->context_window);
    sb_enc_kstr (e, "mcp_server", server);
    sb_exec_entry_close (e);
    sb_enc_array_close (e);
    if (sb_exec_append (run, e) == 0 && usage->known) {
        atomic_store (&run->usage_known, true);
        atomic_fetch_add (&run->input_tokens, usage->in);
        atomic_fetch_add (&run->output_tokens, usage->out);
    }
    sb_exec_budget_note (run, &usage->call, usage->known);
    sb_enc_destroy (&e);
}

sb_mcp_sample_outcome_t
sb_exec_mcp_sample (void *arg, const char *server, const sb_mcp_sample_t *req, sb_mcp_sample_reply_t *reply)
{
    sb_exec_run_t *run = arg;
    sb_mcp_sample_outcome_t outcome = s_approve (run, server, req, reply);
    if (outcome != SB_MCP_SAMPLE_DONE)
        return outcome;
    sb_enc_t *e = s_request (run->runtime, req);
    size_t len;
    const uint8_t *body = sb_enc_data (e, &len);
    sb_exec_text_usage_t usage = { .context = len / 4 };
    //  A request the llm actor refuses (images for a model that takes
    //  none) is the server's to hear about; the run goes on.
    char refused [512] = "";
    sb_exec_stream_t s = { .what = "sampling", .fail = "the MCP sampling call failed", .grace_ms = 0,
                           .refused = refused, .refused_size = sizeof refused };
    size_t tlen = 0;
    int rc = sb_exec_stream_text (run, body, len, &s, &reply->text, &tlen, &usage);
    sb_enc_destroy (&e);
    s_account (run, server, &usage);
    if (rc == SB_EXEC_STREAM_ENDED && reply->text) {
        snprintf (reply->model, sizeof reply->model, "%s", usage.call.model [0] ? usage.call.model
                                                          : run->runtime->model ? run->runtime->model : "");
        //  The provider's stop reason in the specification's words
        snprintf (reply->stop_reason, sizeof reply->stop_reason, "%s",
                  sb_stop_reason_from_name (s.stop) == SB_STOP_LENGTH ? "maxTokens" : "endTurn");
        return SB_MCP_SAMPLE_DONE;
    }
    free (reply->text);
    reply->text = NULL;
    if (rc == SB_EXEC_STREAM_REFUSED) {
        snprintf (reply->error, sizeof reply->error, "the session's model refused the request: %s", refused);
        return SB_MCP_SAMPLE_FAILED;
    }
    snprintf (reply->error, sizeof reply->error, "%s",
              rc == SB_EXEC_STREAM_ENDED ? "the model answered with no text"
            : rc == SB_EXEC_STREAM_CANCELLED ? "the run was cancelled during the model call"
            : rc == SB_EXEC_STREAM_OVERFLOW ? "the request does not fit the model's context window"
            : "the model call failed");
    return SB_MCP_SAMPLE_FAILED;
}
