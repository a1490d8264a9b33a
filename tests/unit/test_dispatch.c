/*  tests/unit/test_dispatch.c — every actor's dispatch table against the schemas.

    Each actor serves one service (the type prefix before the first dot). Every
    request or one-way type the schema tables give that service must have a row
    in the actor's table, and every row must name a request or one-way type of
    that service: a handler for a type the schemas lack could never be reached,
    and a type without a handler would only ever get `unknown_type`. */
#include <criterion/criterion.h>
#include <string.h>

#include "actors/actor.h"
#include "actors/session.h"
#include "actors/session/session_impl.h"
#include "schemas/schema.h"

/*  An actor's table: sb_dispatch_t rows (actors/actor.h), or, for the
    session actor, whose rows name a prepare, a write and a read function,
    its type column. */
typedef struct {
    const char *service;
    const sb_dispatch_t *rows;
    const char *(*type_column) (size_t index);
} actor_t;

static const actor_t s_actors [] = {
    { "session", NULL, sb_session_dispatch_type },
    { "run", sb_run_dispatch, NULL },
    { "worker", sb_worker_dispatch, NULL },
    { "exec", sb_exec_dispatch, NULL },
    { "llm", sb_llm_dispatch, NULL },
    { "hooks", sb_hooks_dispatch, NULL },
    { "interact", sb_interact_dispatch, NULL },
    { "echo", sb_echo_dispatch, NULL },
    { "blob", sb_blob_dispatch, NULL },
};
#define NACTORS (sizeof s_actors / sizeof s_actors [0])

static const char *
s_type_at (const actor_t *a, size_t index)
{
    if (a->type_column)
        return a->type_column (index);
    for (size_t k = 0; k < index; k++)
        if (!a->rows [k].type)
            return NULL;
    return a->rows [index].type;
}

static bool
s_in_service (const char *type, const char *service)
{
    size_t n = strlen (service);
    return strncmp (type, service, n) == 0 && type [n] == '.';
}

static bool
s_handled (const sb_type_t *t)
{
    return t->kind == SB_KIND_REQUEST || t->kind == SB_KIND_ONEWAY;
}

static bool
s_table_has (const actor_t *a, const char *type)
{
    for (size_t i = 0; s_type_at (a, i); i++)
        if (strcmp (s_type_at (a, i), type) == 0)
            return true;
    return false;
}

Test (dispatch, every_schema_request_has_a_handler)
{
    size_t count;
    const sb_type_t *all = sb_schema_all (&count);
    for (size_t a = 0; a < NACTORS; a++) {
        size_t served = 0;
        for (size_t k = 0; k < count; k++)
            if (s_in_service (all [k].name, s_actors [a].service) && s_handled (&all [k])) {
                served++;
                cr_expect (s_table_has (&s_actors [a], all [k].name),
                           "%s has no handler in the %s actor", all [k].name, s_actors [a].service);
            }
        cr_expect_gt (served, 0, "the schemas give the %s service no request", s_actors [a].service);
    }
}

Test (dispatch, every_handler_is_a_schema_request)
{
    for (size_t a = 0; a < NACTORS; a++) {
        size_t rows = 0;
        for (size_t i = 0; s_type_at (&s_actors [a], i); i++, rows++) {
            const char *type = s_type_at (&s_actors [a], i);
            const sb_type_t *t = sb_schema_find (type, strlen (type));
            cr_expect_not_null (t, "the %s actor handles %s, which the schemas lack", s_actors [a].service, type);
            if (!t)
                continue;
            cr_expect (s_in_service (type, s_actors [a].service), "the %s actor handles %s of another service",
                       s_actors [a].service, type);
            cr_expect (s_handled (t), "the %s actor handles %s, which is a %s, not a request",
                       s_actors [a].service, type, sb_kind_name (t->kind));
        }
        cr_expect_gt (rows, 0, "the %s actor's table is empty", s_actors [a].service);
    }
}

Test (dispatch, the_lookup_finds_each_row_and_nothing_else)
{
    for (size_t a = 0; a < NACTORS; a++) {
        const sb_dispatch_t *rows = s_actors [a].rows;
        for (size_t i = 0; rows && rows [i].type; i++) {
            cr_expect_eq (sb_dispatch_find (rows, rows [i].type), &rows [i], "%s", rows [i].type);
            cr_expect_not_null (rows [i].fn, "%s has no handler", rows [i].type);
        }
        if (rows) {
            cr_expect_null (sb_dispatch_find (rows, "no.such.type"));
            cr_expect_null (sb_dispatch_find (rows, ""));
        }
    }
}

Test (dispatch, no_type_twice)
{
    for (size_t a = 0; a < NACTORS; a++)
        for (size_t i = 0; s_type_at (&s_actors [a], i); i++)
            for (size_t j = i + 1; s_type_at (&s_actors [a], j); j++)
                cr_expect_str_neq (s_type_at (&s_actors [a], i), s_type_at (&s_actors [a], j),
                                   "the %s actor's table has a row twice", s_actors [a].service);
}

/*  The session actor's rows (actors/session.c): a request the drain takes
    is a write or a read, never both nor neither; the actor's own ops are
    writes, after every bus type, so the bus lookup never reaches them. */
Test (dispatch, session_rows_name_one_way_to_run)
{
    bool internal = false;
    for (size_t op = 0; op < OP__COUNT; op++) {
        const op_row_t *r = &sb_session_ops [op];
        if (!r->type)
            internal = true;
        else
            cr_expect_not (internal, "op %zu (%s) comes after an internal op: the lookup cannot reach it", op,
                           r->type);
        if (r->take && !r->write && !r->read)
            continue;           /* it takes the message itself (session.compact) */
        cr_expect ((r->write != NULL) != (r->read != NULL), "op %zu (%s) names %s", op,
                   r->type ? r->type : "internal", r->write ? "both a write and a read" : "neither a write nor a read");
        if (!r->type)
            cr_expect_not_null (r->write, "internal op %zu is not a write", op);
    }
    cr_expect (internal, "no internal op: the table has lost its end");
    cr_expect_null (sb_session_ops [OP__COUNT].type);
}
