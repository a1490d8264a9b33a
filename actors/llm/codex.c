/*  actors/llm/codex.c — Codex tokens: read from the token file for each
    attempt, refreshed once when the provider refuses one, and written back
    atomically. */
#include "actors/llm/llm_impl.h"

#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*  Reads access_token and account_id from the token file (top level or
    under "tokens", as the Codex CLI writes it). */
int
sb_llm_codex_load (job_t *job)
{
    json_t *root = json_load_file (job->prov->token_file, 0, NULL);
    if (!root)
        return -1;
    json_t *t = json_object_get (root, "tokens");
    if (!json_is_object (t))
        t = root;
    const char *access = json_string_value (json_object_get (t, "access_token"));
    const char *account = json_string_value (json_object_get (t, "account_id"));
    int rc = -1;
    if (access) {
        free (job->access_token);
        job->access_token = strdup (access);
        snprintf (job->account_id, sizeof job->account_id, "%s", account ? account : "");
        rc = 0;
    }
    json_decref (root);
    return rc;
}

/*  Writes the refreshed tokens back, atomically and private. */
static int
s_codex_store (const char *path, const char *access, const char *refresh)
{
    json_t *root = json_load_file (path, 0, NULL);
    if (!root)
        root = json_object ();
    json_t *t = json_object_get (root, "tokens");
    if (!json_is_object (t))
        t = root;
    json_object_set_new (t, "access_token", json_string (access));
    if (refresh)
        json_object_set_new (t, "refresh_token", json_string (refresh));
    char tmp [1100];
    snprintf (tmp, sizeof tmp, "%s.tmp.%d", path, (int) getpid ());
    int fd = open (tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int rc = -1;
    if (fd >= 0) {
        char *text = json_dumps (root, JSON_INDENT (2));
        if (text && write (fd, text, strlen (text)) == (ssize_t) strlen (text) && fsync (fd) == 0)
            rc = 0;
        free (text);
        close (fd);
        if (rc == 0 && rename (tmp, path) != 0)
            rc = -1;
        if (rc != 0)
            unlink (tmp);
    }
    json_decref (root);
    return rc;
}

void
sb_llm_codex_refresh (self_t *self, job_t *stream)
{
    job_t *r = calloc (1, sizeof *r);
    json_t *tok = json_load_file (stream->prov->token_file, 0, NULL);
    json_t *t = tok ? json_object_get (tok, "tokens") : NULL;
    if (!json_is_object (t))
        t = tok;
    const char *refresh = t ? json_string_value (json_object_get (t, "refresh_token")) : NULL;
    if (!r || !refresh || !stream->prov->token_url [0]) {
        free (r);
        json_decref (tok);
        sb_llm_fail_stream (self, stream, SB_E_auth, false, "no_refresh_token", 401,
                       "the provider refused the token and it cannot be refreshed (no refresh_token or token_url)");
        return;
    }
    r->kind = JOB_REFRESH;
    r->self = self;
    r->parent = stream;
    r->prov = stream->prov;
    json_t *body = json_pack ("{s:s, s:s}", "grant_type", "refresh_token", "refresh_token", refresh);
    if (stream->prov->client_id [0])
        json_object_set_new (body, "client_id", json_string (stream->prov->client_id));
    r->body = json_dumps (body, JSON_COMPACT);
    json_decref (body);
    json_decref (tok);
    r->easy = curl_easy_init ();
    sb_llm_curl_opts (r, stream->prov->token_url);
    curl_easy_setopt (r->easy, CURLOPT_POSTFIELDS, r->body);
    r->headers = curl_slist_append (NULL, "Content-Type: application/json");
    curl_easy_setopt (r->easy, CURLOPT_HTTPHEADER, r->headers);
    stream->refreshed = true;
    if (curl_multi_add_handle (self->multi, r->easy) == CURLM_OK)
        r->in_multi = true;
    sb_info (ACTOR, "refreshing the codex token id=%s provider=%s", stream->id, stream->prov->name);
}

void
sb_llm_codex_refresh_done (self_t *self, job_t *r, CURLcode res)
{
    job_t *stream = r->parent;
    long status = 0;
    curl_easy_getinfo (r->easy, CURLINFO_RESPONSE_CODE, &status);
    json_t *resp = res == CURLE_OK && status == 200 && r->resp ? json_loads (r->resp, 0, NULL) : NULL;
    const char *access = resp ? json_string_value (json_object_get (resp, "access_token")) : NULL;
    const char *refresh = resp ? json_string_value (json_object_get (resp, "refresh_token")) : NULL;
    if (!zhashx_lookup (self->jobs, stream->id)) {
        /* the stream was cancelled meanwhile */
    }
    else
    if (!access || s_codex_store (stream->prov->token_file, access, refresh) != 0) {
        sb_llm_fail_stream (self, stream, SB_E_auth, false, "refresh_failed", status,
                       "the token refresh failed; sign in again");
    }
    else {
        free (stream->access_token);
        stream->access_token = NULL;
        if (sb_llm_attempt (self, stream) != 0)
            sb_llm_fail_stream (self, stream, SB_E_internal, true, NULL, 0, "cannot start the request");
    }
    json_decref (resp);
    sb_llm_job_destroy (&r);
}

