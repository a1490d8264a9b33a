/*  actors/exec/policy.c — approval modes, rules and session-scope
    decisions (actors/exec/policy.h, docs/approvals.md).

    The decision is pure: rules, mode and the remembered decisions in,
    one action out. The state is what the tape says about approvals and
    calls, rebuilt entry by entry, bounded everywhere: a session that
    grants thousands of distinct calls forgets the oldest grants (a person
    is asked again), never grows without end.
*/
#include "actors/exec/policy.h"

#include <fnmatch.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static const char *s_modes [] = { "yolo", "auto", "interactive" };
static const char *s_actions [] = { "allow", "ask", "deny" };

//  The tools auto allows: they read and never write or run anything the
//  model chose (grep and git run fixed programs on fixed argv).
static const char *s_read_only [] = { "read_file", "list_dir", "grep", "git_status", "git_diff" };

//  The tools whose match key is a path, and its argument.
static const char *s_path_tools [] = {
    "read_file", "write_file", "edit_file", "list_dir", "grep", "git_diff", "git_status"
};

sb_policy_mode_t
sb_policy_mode_from_name (const char *name)
{
    if (!name || !*name)
        return SB_POLICY_AUTO;
    for (int k = 0; k < SB_POLICY__MODES; k++)
        if (strcmp (name, s_modes [k]) == 0)
            return (sb_policy_mode_t) k;
    return SB_POLICY__MODES;
}

const char *
sb_policy_mode_name (sb_policy_mode_t mode)
{
    return (unsigned) mode < SB_POLICY__MODES ? s_modes [mode] : "?";
}

sb_policy_action_t
sb_policy_action_from_name (const char *name)
{
    for (int k = 0; name && k < SB_POLICY__ACTIONS; k++)
        if (strcmp (name, s_actions [k]) == 0)
            return (sb_policy_action_t) k;
    return SB_POLICY__ACTIONS;
}

const char *
sb_policy_action_name (sb_policy_action_t action)
{
    return (unsigned) action < SB_POLICY__ACTIONS ? s_actions [action] : "?";
}

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

char *
sb_policy_match_key (const char *tool, const char *arguments, const char *workspace)
{
    json_error_t jerr;
    json_t *args = arguments && *arguments ? json_loads (arguments, JSON_REJECT_DUPLICATES, &jerr) : json_object ();
    char *key = NULL;
    if (!tool || !args || !json_is_object (args))
        key = strdup ("");
    else
    if (strcmp (tool, "shell") == 0) {
        const char *cmd = json_string_value (json_object_get (args, "command"));
        key = strdup (cmd ? cmd : "");
    }
    else
    if (s_path_tool (tool)) {
        const char *path = json_string_value (json_object_get (args, "path"));
        key = s_fold_path (path && *path ? path : ".", workspace);
    }
    else
        key = strdup (arguments ? arguments : "");
    json_decref (args);
    if (key && strlen (key) > SB_POLICY_KEY_MAX)
        key [SB_POLICY_KEY_MAX] = 0;
    return key;
}

const char *
sb_policy_rule_check (const char *tool, const char *pattern, const char *action)
{
    if (!tool || !*tool || strlen (tool) > SB_POLICY_RULE_TOOL_MAX)
        return "tool must be a glob of 1 to 128 bytes (e.g. shell, write_file, mcp__srv__*)";
    if (!pattern || !*pattern || strlen (pattern) > SB_POLICY_RULE_PATTERN_MAX)
        return "pattern must be a glob of 1 to 1024 bytes (e.g. 'git *', 'src/*', '*')";
    if (sb_policy_action_from_name (action) == SB_POLICY__ACTIONS)
        return "action must be allow, ask or deny";
    return NULL;
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

sb_policy_decision_t
sb_policy_decide (sb_policy_mode_t mode, const sb_policy_rule_t *rules, size_t nrules,
                  const sb_policy_t *state, const char *tool, const char *key)
{
    sb_policy_decision_t d = { SB_POLICY_ASK, SB_POLICY_BY_MODE, -1 };
    if (mode == SB_POLICY_YOLO)
        d.action = SB_POLICY_ALLOW;
    else
    if (mode == SB_POLICY_AUTO && sb_policy_read_only (tool))
        d.action = SB_POLICY_ALLOW;
    //  the last matching rule wins: walk backwards, stop at the first
    for (size_t k = nrules; k-- > 0; ) {
        const sb_policy_rule_t *r = &rules [k];
        if (r->tool && r->pattern && (unsigned) r->action < SB_POLICY__ACTIONS
        &&  fnmatch (r->tool, tool ? tool : "", 0) == 0 && fnmatch (r->pattern, key ? key : "", 0) == 0) {
            d.action = r->action;
            d.by = SB_POLICY_BY_RULE;
            d.rule = (int) k;
            break;
        }
    }
    if (d.action == SB_POLICY_ASK && state) {
        int g = sb_policy_granted (state, tool, key);
        if (g >= 0) {
            d.action = g ? SB_POLICY_ALLOW : SB_POLICY_DENY;
            d.by = SB_POLICY_BY_SESSION;
            d.rule = -1;
        }
    }
    return d;
}

//  ---------------------------------------------------------------------
//  The state

typedef struct {
    char *tool, *key;
    bool approve;
} s_grant_t;

typedef struct {
    char *interaction_id, *tool, *key;
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
s_grant_free (s_grant_t *g)
{
    free (g->tool);
    free (g->key);
}

static void
s_asked_free (s_asked_t *a)
{
    free (a->interaction_id);
    free (a->tool);
    free (a->key);
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
    for (size_t k = 0; k < self->ngrants; k++)
        s_grant_free (&self->grants [k]);
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

int
sb_policy_granted (const sb_policy_t *self, const char *tool, const char *key)
{
    //  newest first: a later decision on the same call replaces an older
    for (size_t k = self ? self->ngrants : 0; k-- > 0; )
        if (strcmp (self->grants [k].tool, tool ? tool : "") == 0
        &&  strcmp (self->grants [k].key, key ? key : "") == 0)
            return self->grants [k].approve ? 1 : 0;
    return -1;
}

int
sb_policy_grant (sb_policy_t *self, const char *tool, const char *key, bool approve)
{
    tool = tool ? tool : "";
    key = key ? key : "";
    for (size_t k = 0; k < self->ngrants; k++)
        if (strcmp (self->grants [k].tool, tool) == 0 && strcmp (self->grants [k].key, key) == 0) {
            self->grants [k].approve = approve;
            return 0;
        }
    s_grant_t g = { strdup (tool), strdup (key), approve };
    if (!g.tool || !g.key) {
        s_grant_free (&g);
        return -1;
    }
    if (self->ngrants == SB_POLICY_GRANTS_MAX) {
        s_grant_free (&self->grants [0]);
        memmove (&self->grants [0], &self->grants [1], (SB_POLICY_GRANTS_MAX - 1) * sizeof g);
        self->ngrants--;
    }
    if (!s_reserve ((void **) &self->grants, &self->grants_cap, self->ngrants, sizeof g)) {
        s_grant_free (&g);
        return -1;
    }
    self->grants [self->ngrants++] = g;
    return 0;
}

static int
s_asked_add (sb_policy_t *self, const char *id, const char *tool, const char *arguments, const char *workspace)
{
    for (size_t k = 0; k < self->nasked; k++)
        if (strcmp (self->asked [k].interaction_id, id) == 0)
            return 0;
    s_asked_t a = { strdup (id), strdup (tool), sb_policy_match_key (tool, arguments, workspace) };
    if (!a.interaction_id || !a.tool || !a.key) {
        s_asked_free (&a);
        return -1;
    }
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
        if (scope && strcmp (scope, "session") == 0 && decision && !(by && strcmp (by, "deadline") == 0))
            rc = sb_policy_grant (self, self->asked [k].tool, self->asked [k].key,
                                  strcmp (decision, "approve") == 0);
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
