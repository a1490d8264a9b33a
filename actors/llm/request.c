/*  actors/llm/request.c — an llm.stream body (schemas/types_llm.c) turned
    into the provider's HTTP request body. */
#include "actors/llm/llm_impl.h"
#include "common/blob.h"

#include <stdlib.h>
#include <string.h>

int
sb_llm_build_request (self_t *self, const sb_val_t *body, job_t *job, char *err, size_t errlen)
{
    const sb_val_t *msgs = sb_get_array (body, "messages");
    const sb_val_t *tools = sb_get_array (body, "tools");
    size_t nm = msgs ? msgs->len : 0, nt = tools ? tools->len : 0;
    sb_llm_message_t *m = calloc (nm ? nm : 1, sizeof *m);
    sb_llm_tool_t *t = calloc (nt ? nt : 1, sizeof *t);
    size_t ncalls = 0;
    for (size_t k = 0; k < nm; k++) {
        const sb_val_t *calls = sb_get_array (sb_array_at (msgs, (uint32_t) k), "tool_calls");
        ncalls += calls ? calls->len : 0;
    }
    sb_llm_tool_call_t *calls_mem = calloc (ncalls ? ncalls : 1, sizeof *calls_mem);
    size_t nimages = 0;
    for (size_t k = 0; k < nm; k++) {
        const sb_val_t *ims = sb_get_array (sb_array_at (msgs, (uint32_t) k), "images");
        nimages += ims ? ims->len : 0;
    }
    sb_llm_image_t *images_mem = calloc (nimages ? nimages : 1, sizeof *images_mem);
    int rc = -1;
    if (nimages && !sb_llm_model_takes_images (job->prov, job->model)) {
        snprintf (err, errlen, "model %s of provider %s does not take images (the providers file says "
                  "\"images\": false, or it is the demo model); send the prompt without them, or choose another model",
                  job->model [0] ? job->model : job->prov->model, job->prov->name);
        goto done;
    }
    if (!m || !t || !calls_mem || !images_mem) {
        snprintf (err, errlen, "out of memory");
        goto done;
    }
    size_t used = 0, used_images = 0;
    for (size_t k = 0; k < nm; k++) {
        const sb_val_t *v = sb_array_at (msgs, (uint32_t) k);
        //  the schema's ENUM row took only these names; the check stays
        //  for callers that hand a request in without the bus
        m [k].role = sb_llm_role_from_name (sb_get_str (v, "role"));
        if (m [k].role == SB_LLM_ROLE__COUNT) {
            snprintf (err, errlen, "messages[%zu].role must be user, assistant or tool", k);
            goto done;
        }
        m [k].content = sb_get_str (v, "content");
        m [k].call_id = sb_get_str (v, "call_id");
        m [k].reasoning_state = sb_get_str (v, "reasoning_state");
        const sb_val_t *ims = sb_get_array (v, "images");
        if (ims && ims->len && m [k].role == SB_LLM_ROLE_USER) {
            m [k].images = &images_mem [used_images];
            m [k].image_count = ims->len;
            for (uint32_t i = 0; i < ims->len; i++, used_images++) {
                const sb_val_t *iv = sb_array_at (ims, i);
                sb_llm_image_t *im = &images_mem [used_images];
                im->mime = sb_get_str (iv, "mime");
                im->data = (const uint8_t *) sb_get_bin (iv, "data", &im->len);
                if (!sb_blob_is_image (im->mime) || !im->data) {
                    snprintf (err, errlen, "messages[%zu].images[%u]: mime must be an image type, with data", k, i);
                    goto done;
                }
            }
        }
        const sb_val_t *calls = sb_get_array (v, "tool_calls");
        if (calls && calls->len) {
            m [k].tool_calls = &calls_mem [used];
            m [k].tool_call_count = calls->len;
            for (uint32_t c = 0; c < calls->len; c++, used++) {
                const sb_val_t *cv = sb_array_at (calls, c);
                calls_mem [used].call_id = sb_get_str (cv, "call_id");
                calls_mem [used].name = sb_get_str (cv, "name");
                calls_mem [used].arguments = sb_get_str (cv, "arguments");
            }
        }
    }
    for (size_t k = 0; k < nt; k++) {
        const sb_val_t *v = sb_array_at (tools, (uint32_t) k);
        t [k].name = sb_get_str (v, "name");
        t [k].description = sb_get_str (v, "description");
        t [k].parameters = sb_get_str (v, "parameters");
    }
    sb_llm_request_t req = {
        .model = job->model,
        .instructions = sb_get_str (body, "instructions"),
        .messages = m, .message_count = nm,
        .tools = t, .tool_count = nt,
    };
    const sb_val_t *opt = sb_get_map (body, "options");
    if (opt) {
        req.options.reasoning_effort = sb_get_str (opt, "reasoning_effort");
        if (sb_get (opt, "max_output_tokens")) {
            req.options.has_max_output_tokens = true;
            req.options.max_output_tokens = (int64_t) sb_get_uint (opt, "max_output_tokens", 0);
        }
        if (sb_get (opt, "temperature")) {
            req.options.has_temperature = true;
            req.options.temperature = sb_get_float (opt, "temperature", 1.0);
        }
    }
    job->body = sb_provider_build_body (job->prov->kind, &req, err, errlen);
    rc = job->body ? 0 : -1;
done:
    free (m);
    free (t);
    free (calls_mem);
    free (images_mem);
    return rc;
}

