/*  actors/exec/policy.c — approval modes, rules and session-scope
    decisions (actors/exec/policy.h, docs/approvals.md).

    The decision is pure: rules, mode and the remembered decisions in,
    one action out. The state is what the tape says about approvals and
    calls, rebuilt entry by entry, bounded everywhere: a session that
    grants thousands of distinct calls forgets the oldest grants (a person
    is asked again), never grows without end.
*/
#include "actors/exec/policy.h"

#include "actors/exec/path.h"
#include "schemas/interaction.h"

#include <ctype.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <sys/types.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

//  The tools auto allows: they read and never write or run anything the
//  model chose (grep and git run fixed programs on fixed argv). attach_file
//  counts as read-only: it adds an artifact to the session's blobs (held to
//  the session's quota) and changes no workspace file.
static const char *s_read_only [] = { "read_file", "list_dir", "grep",       "git_status",
                                      "git_diff",  "view_image", "attach_file" };

//  The tools whose match key is a path, and its argument.
static const char *s_path_tools [] = {
    "read_file", "write_file", "edit_file", "list_dir", "grep", "git_diff", "git_status",
    "view_image", "attach_file"
};

bool
sb_policy_read_only (const char *tool)
{
    for (size_t k = 0; tool && k < sizeof s_read_only / sizeof s_read_only [0]; k++)
        if (strcmp (tool, s_read_only [k]) == 0)
            return true;
    return false;
}

static bool
s_path_tool (const char *tool)
{
    for (size_t k = 0; tool && k < sizeof s_path_tools / sizeof s_path_tools [0]; k++)
        if (strcmp (tool, s_path_tools [k]) == 0)
            return true;
    return false;
}

//  Folds a path lexically: "./", "//" and "dir/.." go; an absolute path
//  inside `workspace` becomes relative to it. Nothing touches the
//  filesystem: the tool resolves (and confines) the real path itself, so
//  this only makes the spellings of one path match one rule.
static char *
s_fold_path (const char *path, const char *workspace)
{
    size_t n = strlen (path);
    char *out = malloc (n + 4);
    if (!out)
        return NULL;
    bool absolute = path [0] == '/';
    if (absolute && workspace && *workspace == '/') {
        size_t w = strlen (workspace);
        while (w > 1 && workspace [w - 1] == '/')
            w--;
        if (w == 1 || (strncmp (path, workspace, w) == 0 && (path [w] == '/' || path [w] == 0))) {
            path += w;
            absolute = false;
        }
    }
    //  the components, folded into out after the root
    size_t base = absolute ? 1 : 0, len = base;
    if (absolute)
        out [0] = '/';
    const char *p = path;
    while (*p) {
        while (*p == '/')
            p++;
        if (!*p)
            break;
        const char *end = strchr (p, '/');
        size_t cl = end ? (size_t) (end - p) : strlen (p);
        if (cl == 1 && p [0] == '.') {
            /* "." adds nothing */
        }
        else
        if (cl == 2 && p [0] == '.' && p [1] == '.') {
            //  drops the last component; one that is itself ".." (or none)
            //  stays: the tool refuses a path that leaves the workspace
            size_t at = len;
            while (at > base && out [at - 1] != '/')
                at--;
            bool up = len - at == 2 && out [at] == '.' && out [at + 1] == '.';
            if (len > base && !up)
                len = at > base ? at - 1 : base;
            else
            if (!absolute || len > base) {
                if (len > base)
                    out [len++] = '/';
                memcpy (out + len, "..", 2);
                len += 2;
            }
        }
        else {
            if (len > base)
                out [len++] = '/';
            memcpy (out + len, p, cl);
            len += cl;
        }
        p += cl;
    }
    if (len == 0)
        out [len++] = '.';
    out [len] = 0;
    return out;
}

//  The path as the tool will find it: its symlinks resolved under the
//  workspace, relative to it. NULL when it leaves the workspace (the tool
//  refuses it then) or there is no workspace.
static char *
s_resolve_path (const char *path, const char *workspace)
{
    if (!workspace || workspace [0] != '/' || strlen (workspace) >= PATH_MAX)
        return NULL;
    char ws [PATH_MAX], out [PATH_MAX], err [16];
    snprintf (ws, sizeof ws, "%s", workspace);
    size_t w = strlen (ws);
    while (w > 1 && ws [w - 1] == '/')
        ws [--w] = 0;
    if (sb_path_resolve (ws, path, true, out, sizeof out, err, sizeof err) != 0)
        return NULL;
    const char *rel = sb_path_relative (ws, out);
    return rel ? strdup (rel) : NULL;
}

//  The key's text for a call (see policy.h).
static int
s_key_text (sb_policy_key_t *k, const char *tool, json_t *args, const char *arguments, const char *workspace)
{
    if (!tool || !args || !json_is_object (args))
        return (k->text = strdup ("")) ? 0 : -1;
    if (strcmp (tool, "shell") == 0) {
        const char *cmd = json_string_value (json_object_get (args, "command"));
        size_t len = cmd ? json_string_length (json_object_get (args, "command")) : 0;
        if (!(k->text = strdup (cmd ? cmd : "")))
            return -1;
        return (k->sh = sb_sh_parse (k->text, len)) ? 0 : -1;
    }
    if (s_path_tool (tool)) {
        const char *path = json_string_value (json_object_get (args, "path"));
        path = path && *path ? path : ".";
        char *folded = s_fold_path (path, workspace);
        char *real = s_resolve_path (path, workspace);
        if (!folded) {
            free (real);
            return -1;
        }
        if (real && strcmp (real, folded) != 0) {
            k->text = real;
            k->spelled = folded;
        }
        else {
            free (real);
            k->text = folded;
        }
        return 0;
    }
    return (k->text = strdup (arguments ? arguments : "")) ? 0 : -1;
}

//  What scope session remembers a call by: tool, NUL, the whole key.
static int
s_key_digest (sb_policy_key_t *k, const char *tool)
{
    sb_digest_t *d = sb_digest_new ();
    if (!d)
        return -1;
    sb_digest_update (d, tool ? tool : "", strlen (tool ? tool : "") + 1);
    sb_digest_update (d, k->text, strlen (k->text));
    sb_digest_final (d, k->digest);
    sb_digest_destroy (&d);
    return 0;
}

sb_policy_key_t *
sb_policy_key_new (const char *tool, const char *arguments, const char *workspace)
{
    sb_policy_key_t *k = calloc (1, sizeof *k);
    if (!k)
        return NULL;
    json_error_t jerr;
    json_t *args = arguments && *arguments ? json_loads (arguments, JSON_REJECT_DUPLICATES, &jerr) : json_object ();
    int rc = s_key_text (k, tool, args, arguments, workspace);
    json_decref (args);
    if (rc != 0 || s_key_digest (k, tool) != 0)
        sb_policy_key_destroy (&k);
    return k;
}

void
sb_policy_key_destroy (sb_policy_key_t **self_p)
{
    sb_policy_key_t *k = *self_p;
    if (!k)
        return;
    free (k->text);
    free (k->spelled);
    sb_sh_destroy (&k->sh);
    free (k);
    *self_p = NULL;
}

int
sb_policy_exact_pattern (const char *key, char *out, size_t size)
{
    size_t w = 0;
    for (const char *p = key; p && *p; p++) {
        bool special = *p == '*' || *p == '?' || *p == '[' || *p == ']' || *p == '\\';
        if (w + (special ? 2 : 1) >= size)
            return -1;
        if (special)
            out [w++] = '\\';
        out [w++] = *p;
    }
    if (w == 0 || w >= size)
        return -1;
    out [w] = 0;
    return (int) w;
}

//  Whether a command's first word, unquoted, would read as something
//  else: an assignment (NAME=...) or a keyword (if, for, ...).
static bool
s_reads_as_syntax (const char *word)
{
    static const char *keywords [] = {
        "if", "then", "else", "elif", "fi", "do", "done", "while", "until", "for", "in", "case", "esac",
        "function", "select", "coproc",
    };
    for (size_t k = 0; k < sizeof keywords / sizeof keywords [0]; k++)
        if (strcmp (word, keywords [k]) == 0)
            return true;
    return strchr (word, '=') != NULL;
}

int
sb_policy_exact_rule (const char *tool, const sb_policy_key_t *key, char *out, size_t size)
{
    if (!key)
        return -1;
    if (!(tool && strcmp (tool, "shell") == 0 && key->sh))
        return sb_policy_exact_pattern (key->text, out, size);
    const sb_sh_cmd_t *c = sb_sh_whole (key->sh);
    if (!c || sb_policy_shell_risky (c))
        return -1;
    //  each word as is when it is plain, else in single quotes
    size_t w = 0;
    for (size_t a = 0; a < c->argc; a++) {
        const char *word = c->argv [a];
        bool plain = *word != 0 && !(a == 0 && s_reads_as_syntax (word));
        for (const char *p = word; *p && plain; p++)
            plain = isalnum ((unsigned char) *p) || strchr ("_./=:,+@%^-", *p);
        size_t need = strlen (word) * 4 + 4;
        if (w + need >= size)
            return -1;
        if (a)
            out [w++] = ' ';
        if (!plain)
            out [w++] = '\'';
        for (const char *p = word; *p; p++) {
            if (*p == '\'' && !plain) {
                memcpy (out + w, "'\\''", 4);
                w += 4;
            }
            else
                out [w++] = *p;
        }
        if (!plain)
            out [w++] = '\'';
    }
    if (w == 0 || w >= size)
        return -1;
    out [w] = 0;
    return (int) w;
}

//  The tools that read a path a read_file deny rule also stops.
static bool
s_reads (const char *tool)
{
    return tool && (strcmp (tool, "grep") == 0 || strcmp (tool, "list_dir") == 0 || strcmp (tool, "git_diff") == 0
                    || strcmp (tool, "view_image") == 0 || strcmp (tool, "attach_file") == 0);
}

//  Whether a path is in a .git folder, at any depth.
static bool
s_in_git (const char *path)
{
    size_t n = strlen (path);
    return strcmp (path, ".git") == 0 || strncmp (path, ".git/", 5) == 0 || strstr (path, "/.git/")
        || (n >= 5 && strcmp (path + n - 5, "/.git") == 0);
}

//  Whether rule r decides a call of a tool other than shell.
static bool
s_plain_matches (const sb_policy_rule_t *r, const char *tool, const sb_policy_key_t *key)
{
    tool = tool ? tool : "";
    bool named = fnmatch (r->tool, tool, 0) == 0;
    if (!named && !(r->action == SB_POLICY_DENY && s_reads (tool) && fnmatch (r->tool, "read_file", 0) == 0))
        return false;
    const char *text = key ? key->text : "";
    if (r->action != SB_POLICY_ALLOW)
        return fnmatch (r->pattern, text, 0) == 0 || (key && key->spelled && fnmatch (r->pattern, key->spelled, 0) == 0);
    //  an allow rule sees where the tool goes, and names .git to write there
    if (fnmatch (r->pattern, text, 0) != 0)
        return false;
    bool writes = strcmp (tool, "write_file") == 0 || strcmp (tool, "edit_file") == 0;
    return !(writes && s_in_git (text) && !strstr (r->pattern, ".git"));
}

sb_policy_decision_t
sb_policy_decide (sb_policy_mode_t mode, const sb_policy_rule_t *rules, size_t nrules,
                  const sb_policy_t *state, const char *tool, const sb_policy_key_t *key)
{
    sb_policy_decision_t d = { SB_POLICY_ASK, SB_POLICY_BY_MODE, -1 };
    if (tool && strcmp (tool, "shell") == 0 && key && key->sh)
        d = sb_policy_shell_decide (mode, rules, nrules, tool, key);
    else {
        if (mode == SB_POLICY_YOLO)
            d.action = SB_POLICY_ALLOW;
        else
        if (mode == SB_POLICY_AUTO && sb_policy_read_only (tool))
            d.action = SB_POLICY_ALLOW;
        //  the last matching rule wins: walk backwards, stop at the first
        for (size_t k = nrules; k-- > 0; ) {
            const sb_policy_rule_t *r = &rules [k];
            if (r->tool && r->pattern && (unsigned) r->action < SB_POLICY__ACTIONS && s_plain_matches (r, tool, key)) {
                d.action = r->action;
                d.by = SB_POLICY_BY_RULE;
                d.rule = (int) k;
                break;
            }
        }
    }
    if (d.action == SB_POLICY_ASK && state && key) {
        int g = sb_policy_granted (state, key);
        if (g >= 0) {
            d.action = g ? SB_POLICY_ALLOW : SB_POLICY_DENY;
            d.by = SB_POLICY_BY_SESSION;
            d.rule = -1;
        }
    }
    return d;
}

bool
sb_policy_read_denied (const sb_policy_rule_t *rules, size_t nrules, const char *path)
{
    sb_policy_key_t key = { .text = (char *) (path ? path : "") };
    for (size_t k = nrules; k-- > 0; ) {
        const sb_policy_rule_t *r = &rules [k];
        if (r->tool && r->pattern && (unsigned) r->action < SB_POLICY__ACTIONS
        &&  s_plain_matches (r, "read_file", &key))
            return r->action == SB_POLICY_DENY;
    }
    return false;
}

//  ---------------------------------------------------------------------
//  The state

typedef struct {
    uint8_t digest [SB_DIGEST_LEN];
    bool approve;
} s_grant_t;

typedef struct {
    char *interaction_id;
    uint8_t digest [SB_DIGEST_LEN];
    bool no_rule;               //  scope always cannot be a rule: it counts for the session
} s_asked_t;

typedef struct {
    char *call_id, *name, *arguments, *run_id;
} s_call_t;

//  The arrays grow as needed up to their bound: a runtime cache holds
//  hundreds of these, most with nothing in them.
struct sb_policy {
    s_grant_t *grants;
    size_t ngrants, grants_cap;
    s_asked_t *asked;
    size_t nasked, asked_cap;
    s_call_t *calls;
    size_t ncalls, calls_cap;
};

//  Room for one more element; false when out of memory.
static bool
s_reserve (void **array, size_t *cap, size_t count, size_t elem)
{
    if (count < *cap)
        return true;
    size_t ncap = *cap ? *cap * 2 : 8;
    void *p = realloc (*array, ncap * elem);
    if (!p)
        return false;
    *array = p;
    *cap = ncap;
    return true;
}

sb_policy_t *
sb_policy_new (void)
{
    return calloc (1, sizeof (sb_policy_t));
}

static void
s_asked_free (s_asked_t *a)
{
    free (a->interaction_id);
}

static void
s_call_free (s_call_t *c)
{
    free (c->call_id);
    free (c->name);
    free (c->arguments);
    free (c->run_id);
}

void
sb_policy_destroy (sb_policy_t **self_p)
{
    sb_policy_t *self = *self_p;
    if (!self)
        return;
    for (size_t k = 0; k < self->nasked; k++)
        s_asked_free (&self->asked [k]);
    for (size_t k = 0; k < self->ncalls; k++)
        s_call_free (&self->calls [k]);
    free (self->grants);
    free (self->asked);
    free (self->calls);
    free (self);
    *self_p = NULL;
}

//  The newest grant for a digest, or -1.
static ssize_t
s_grant_find (const sb_policy_t *self, const uint8_t digest [SB_DIGEST_LEN])
{
    for (size_t k = self ? self->ngrants : 0; k-- > 0; )
        if (memcmp (self->grants [k].digest, digest, SB_DIGEST_LEN) == 0)
            return (ssize_t) k;
    return -1;
}

int
sb_policy_granted (const sb_policy_t *self, const sb_policy_key_t *key)
{
    ssize_t k = key ? s_grant_find (self, key->digest) : -1;
    return k < 0 ? -1 : self->grants [k].approve ? 1 : 0;
}

//  Remembers a decision for a digest; the oldest goes past the bound.
static int
s_grant_digest (sb_policy_t *self, const uint8_t digest [SB_DIGEST_LEN], bool approve)
{
    ssize_t at = s_grant_find (self, digest);
    if (at >= 0) {
        self->grants [at].approve = approve;
        return 0;
    }
    s_grant_t g = { .approve = approve };
    memcpy (g.digest, digest, SB_DIGEST_LEN);
    if (self->ngrants == SB_POLICY_GRANTS_MAX) {
        memmove (&self->grants [0], &self->grants [1], (SB_POLICY_GRANTS_MAX - 1) * sizeof g);
        self->ngrants--;
    }
    if (!s_reserve ((void **) &self->grants, &self->grants_cap, self->ngrants, sizeof g))
        return -1;
    self->grants [self->ngrants++] = g;
    return 0;
}

int
sb_policy_grant (sb_policy_t *self, const sb_policy_key_t *key, bool approve)
{
    return key ? s_grant_digest (self, key->digest, approve) : -1;
}

static int
s_asked_add (sb_policy_t *self, const char *id, const char *tool, const char *arguments, const char *workspace)
{
    for (size_t k = 0; k < self->nasked; k++)
        if (strcmp (self->asked [k].interaction_id, id) == 0)
            return 0;
    sb_policy_key_t *key = sb_policy_key_new (tool, arguments, workspace);
    s_asked_t a = { strdup (id), { 0 }, false };
    if (!a.interaction_id || !key) {
        sb_policy_key_destroy (&key);
        s_asked_free (&a);
        return -1;
    }
    memcpy (a.digest, key->digest, SB_DIGEST_LEN);
    char pattern [SB_POLICY_RULE_PATTERN_MAX + 1];
    a.no_rule = sb_policy_exact_rule (tool, key, pattern, sizeof pattern) < 0;
    sb_policy_key_destroy (&key);
    if (self->nasked == SB_POLICY_ASKED_MAX) {
        s_asked_free (&self->asked [0]);
        memmove (&self->asked [0], &self->asked [1], (SB_POLICY_ASKED_MAX - 1) * sizeof a);
        self->nasked--;
    }
    if (!s_reserve ((void **) &self->asked, &self->asked_cap, self->nasked, sizeof a)) {
        s_asked_free (&a);
        return -1;
    }
    self->asked [self->nasked++] = a;
    return 0;
}

static int
s_resolved (sb_policy_t *self, const sb_val_t *body)
{
    const char *id = sb_get_str (body, "interaction_id");
    const char *scope = sb_get_str (body, "scope");
    const char *decision = sb_get_str (body, "decision");
    for (size_t k = 0; id && k < self->nasked; k++) {
        if (strcmp (self->asked [k].interaction_id, id) != 0)
            continue;
        int rc = 0;
        //  a deadline's default decision is not a person's: it covers
        //  this call only
        const char *by = sb_get_str (body, "resolved_by");
        //  scope always that no rule can say counts for the session
        ia_scope_t sc = sb_ia_scope_from_name (scope);
        bool session = sc == IA_SESSION || (sc == IA_ALWAYS && self->asked [k].no_rule);
        if (session && decision && !(by && strcmp (by, "deadline") == 0))
            rc = s_grant_digest (self, self->asked [k].digest, sb_ia_decision_from_name (decision) == IA_APPROVE);
        s_asked_free (&self->asked [k]);
        memmove (&self->asked [k], &self->asked [k + 1], (self->nasked - k - 1) * sizeof self->asked [0]);
        self->nasked--;
        return rc;
    }
    return 0;
}

static int
s_call_add (sb_policy_t *self, const char *call_id, const char *name, const char *arguments, const char *run_id)
{
    s_call_t c = { strdup (call_id), strdup (name ? name : ""), strdup (arguments ? arguments : ""),
                   strdup (run_id ? run_id : "") };
    if (!c.call_id || !c.name || !c.arguments || !c.run_id) {
        s_call_free (&c);
        return -1;
    }
    //  past the bound the oldest is forgotten: a call that old was
    //  answered long ago or never will be
    if (self->ncalls == SB_POLICY_PENDING_MAX) {
        s_call_free (&self->calls [0]);
        memmove (&self->calls [0], &self->calls [1], (SB_POLICY_PENDING_MAX - 1) * sizeof c);
        self->ncalls--;
    }
    if (!s_reserve ((void **) &self->calls, &self->calls_cap, self->ncalls, sizeof c)) {
        s_call_free (&c);
        return -1;
    }
    self->calls [self->ncalls++] = c;
    return 0;
}

static void
s_call_answered (sb_policy_t *self, const char *call_id)
{
    //  the oldest unanswered call of that id, as the context pairs them
    for (size_t k = 0; call_id && k < self->ncalls; k++)
        if (strcmp (self->calls [k].call_id, call_id) == 0) {
            s_call_free (&self->calls [k]);
            memmove (&self->calls [k], &self->calls [k + 1], (self->ncalls - k - 1) * sizeof self->calls [0]);
            self->ncalls--;
            return;
        }
}

int
sb_policy_feed (sb_policy_t *self, const sb_val_t *event, const char *workspace)
{
    const char *kind = sb_get_str (event, "kind");
    const sb_val_t *body = sb_get_map (event, "body");
    if (!kind || !body)
        return 0;
    if (strcmp (kind, "tool.call") == 0) {
        const char *id = sb_get_str (body, "call_id");
        return id ? s_call_add (self, id, sb_get_str (body, "name"), sb_get_str (body, "arguments"),
                                sb_get_str (event, "run_id")) : 0;
    }
    if (strcmp (kind, "tool.result") == 0) {
        s_call_answered (self, sb_get_str (body, "call_id"));
        return 0;
    }
    if (strcmp (kind, "approval.requested") == 0) {
        const char *id = sb_get_str (body, "interaction_id");
        const char *tool = sb_get_str (body, "tool");
        return id && tool ? s_asked_add (self, id, tool, sb_get_str (body, "arguments"), workspace) : 0;
    }
    if (strcmp (kind, "approval.resolved") == 0)
        return s_resolved (self, body);
    return 0;
}

size_t
sb_policy_unanswered (const sb_policy_t *self, const char *run_id, sb_policy_call_t *calls, size_t max)
{
    size_t n = 0;
    for (size_t k = 0; k < self->ncalls; k++) {
        const s_call_t *c = &self->calls [k];
        if (run_id && strcmp (c->run_id, run_id) != 0)
            continue;
        if (n < max)
            calls [n] = (sb_policy_call_t) { c->call_id, c->name, c->arguments, c->run_id };
        n++;
    }
    return n;
}
