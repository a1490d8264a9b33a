/*  tests/unit/test_enum.c — the enum field type (SB_T_ENUM, schemas/schema.h):
    the validator takes exactly the names of a field's table (and "" where
    the field says so), refuses anything else with `invalid` naming the
    field and the names, and every ENUM row of the tables names a table
    whose names fit the row. The vocabularies map names to enums and back. */
#include <criterion/criterion.h>
#include <string.h>

#include "schemas/codec.h"
#include "schemas/types.h"

static const sb_field_t s_mode [] = {
    { "p", SB_T_ENUM, false, 16, NULL, "", ENUM (sb_policy_modes) },
    END
};
static const sb_field_t s_mode_or_empty [] = {
    { "p", SB_T_ENUM, false, 16, NULL, "", ENUM_OR_EMPTY (sb_policy_modes) },
    END
};

/*  {p: <s, n bytes>} validated against fields; the error in *err. */
static int
s_check (const sb_field_t *fields, const char *s, size_t n, sb_verr_t *err)
{
    sb_enc_t *enc = sb_enc_new ();
    sb_enc_map_open (enc);
    sb_enc_key (enc, "p");
    sb_enc_strn (enc, s, n);
    sb_enc_map_close (enc);
    size_t len;
    const uint8_t *data = sb_enc_data (enc, &len);
    int rc = sb_validate (data, len, fields, 0, NULL, err);
    sb_enc_destroy (&enc);
    return rc;
}

Test (enum, takes_its_names_and_refuses_the_rest)
{
    sb_verr_t err;
    for (int k = 0; sb_policy_modes [k]; k++)
        cr_assert_eq (s_check (s_mode, sb_policy_modes [k], strlen (sb_policy_modes [k]), &err), 0,
                      "%s: %s", sb_policy_modes [k], err.message);
    const char *bad [] = { "sometimes", "yol", "yolox", "YOLO", "", " auto" };
    for (size_t k = 0; k < sizeof bad / sizeof bad [0]; k++) {
        cr_assert_eq (s_check (s_mode, bad [k], strlen (bad [k]), &err), -1, "'%s' was taken", bad [k]);
        cr_assert_eq (err.code, SB_E_invalid);
        char want [96];
        snprintf (want, sizeof want, "p: '%s' is not one of yolo | auto | interactive", bad [k]);
        cr_assert_str_eq (err.message, want);
    }
    /* a NUL inside is refused as in any string, before the names */
    cr_assert_eq (s_check (s_mode, "auto\0x", 6, &err), -1);
    cr_assert (strstr (err.message, "NUL"), "%s", err.message);
}

Test (enum, empty_only_where_the_row_says)
{
    sb_verr_t err;
    cr_assert_eq (s_check (s_mode_or_empty, "", 0, &err), 0, "%s", err.message);
    cr_assert_eq (s_check (s_mode_or_empty, "auto", 4, &err), 0, "%s", err.message);
    cr_assert_eq (s_check (s_mode_or_empty, "x", 1, &err), -1);
    cr_assert_str_eq (err.message, "p: 'x' is not one of \"\" | yolo | auto | interactive");
    cr_assert_eq (s_check (s_mode, "", 0, &err), -1);
}

Test (enum, a_value_of_another_type_is_refused)
{
    sb_enc_t *enc = sb_enc_new ();
    sb_enc_map_open (enc);
    sb_enc_kuint (enc, "p", 1);
    sb_enc_map_close (enc);
    size_t len;
    const uint8_t *data = sb_enc_data (enc, &len);
    sb_verr_t err;
    cr_assert_eq (sb_validate (data, len, s_mode, 0, NULL, &err), -1);
    cr_assert_str_eq (err.message, "p: expected enum");
    sb_enc_destroy (&enc);
}

/*  Every ENUM row, however deep: it names a table of at least two names,
    each of which its length limit holds. */
static int
s_walk (const char *where, const sb_field_t *fields, int depth)
{
    int found = 0;
    for (int k = 0; fields && fields [k].name && depth < 8; k++) {
        const sb_field_t *f = &fields [k];
        if (f->type == SB_T_ENUM) {
            cr_assert_not_null (f->values, "%s.%s: an ENUM row without names", where, f->name);
            int n = 0;
            for (; f->values [n]; n++)
                cr_assert (*f->values [n] && strlen (f->values [n]) <= (f->max ? f->max : SB_DEFAULT_STR_MAX),
                           "%s.%s: the name '%s' does not fit", where, f->name, f->values [n]);
            cr_assert_geq (n, 2, "%s.%s: %d names", where, f->name, n);
            found++;
        }
        else
            cr_assert (f->values == NULL && !f->empty_ok, "%s.%s: names on a %s row", where, f->name,
                       sb_ftype_name (f->type));
        if (f->type == SB_T_MAP && f->sub)
            found += s_walk (where, f->sub, depth + 1);
        if (f->type == SB_T_ARRAY && f->sub && f->sub->type == SB_T_MAP)
            found += s_walk (where, f->sub->sub, depth + 1);
    }
    return found;
}

/*  A top-level ENUM field of `t` given a name outside its table is refused
    naming the field, whatever else the body holds. */
static void
s_refuses (const sb_type_t *t)
{
    for (int k = 0; t->fields [k].name; k++) {
        const sb_field_t *f = &t->fields [k];
        if (f->type != SB_T_ENUM)
            continue;
        sb_enc_t *enc = sb_enc_new ();
        sb_enc_map_open (enc);
        sb_enc_kstr (enc, f->name, "not-a-name");
        sb_enc_map_close (enc);
        size_t len;
        const uint8_t *data = sb_enc_data (enc, &len);
        sb_verr_t err;
        cr_assert_eq (sb_validate (data, len, t->fields, t->max_bytes, NULL, &err), -1, "%s.%s", t->name, f->name);
        char want [96];
        snprintf (want, sizeof want, "%s: 'not-a-name' is not one of ", f->name);
        cr_assert (strncmp (err.message, want, strlen (want)) == 0 && strstr (err.message, f->values [0]),
                   "%s: %s", t->name, err.message);
        sb_enc_destroy (&enc);
    }
}

Test (enum, every_enum_row_names_a_table_that_fits)
{
    size_t n;
    int found = 0;
    const sb_type_t *all = sb_schema_all (&n);
    for (size_t k = 0; k < n; k++) {
        found += s_walk (all [k].name, all [k].fields, 0);
        s_refuses (&all [k]);
    }
    all = sb_schema_tape_all (&n);
    for (size_t k = 0; k < n; k++) {
        found += s_walk (all [k].name, all [k].fields, 0);
        s_refuses (&all [k]);
    }
    found += s_walk ("header", sb_header_fields, 0);
    cr_assert_geq (found, 20, "only %d ENUM rows", found);
}

Test (enum, the_vocabularies_map_names_both_ways)
{
    for (int k = 0; k < SB_POLICY__MODES; k++)
        cr_assert_eq (sb_policy_mode_from_name (sb_policy_modes [k]), k);
    for (int k = 0; k < SB_POLICY__ACTIONS; k++)
        cr_assert_eq (sb_policy_action_from_name (sb_policy_actions [k]), k);
    for (int k = 0; k < SB_RUN__COUNT; k++)
        cr_assert_str_eq (sb_run_statuses [k], sb_run_status_name ((sb_run_status_t) k));
    cr_assert_null (sb_run_statuses [SB_RUN__COUNT]);
    for (int k = 0; k < IA__COUNT; k++)
        cr_assert_eq (sb_ia_status_from_name (sb_ia_status_name ((ia_status_t) k)), k);
    cr_assert_eq (sb_ia_decision_from_name ("reject"), IA_REJECT);
    cr_assert_eq (sb_ia_scope_from_name ("always"), IA_ALWAYS);
    cr_assert_eq (sb_ia_risk_from_name ("medium"), IA_RISK_MEDIUM);
    cr_assert_eq (sb_ia_risk_from_name ("extreme"), IA__RISKS);
    cr_assert_eq (sb_executor_from_name ("worker"), SB_EXECUTOR_WORKER);
    cr_assert_eq (sb_executor_from_name ("remote"), SB_EXECUTOR__COUNT);
    cr_assert_eq (sb_executor_from_name (NULL), SB_EXECUTOR__COUNT);
    cr_assert_eq (sb_run_kind_from_name (NULL), SB_RUN_KIND_PROMPT);
    cr_assert_eq (sb_run_kind_from_name (""), SB_RUN_KIND_PROMPT);
    cr_assert_eq (sb_run_kind_from_name ("compact"), SB_RUN_KIND_COMPACT);
    cr_assert_eq (sb_session_status_from_name ("closed"), SB_SESSION_CLOSED);
    cr_assert_str_eq (sb_turn_status_name (sb_turn_status_from_name ("cancelling")), "cancelling");
    cr_assert_str_eq (sb_prompt_mode_name (sb_prompt_mode_from_name ("steer")), "steer");
    cr_assert_eq (sb_compact_method_from_name ("summary"), SB_COMPACT_SUMMARY);
    cr_assert_eq (sb_workspace_sync_from_name ("same_path"), SB_SYNC_SAME_PATH);
    cr_assert_eq (sb_worker_status_from_name ("offline"), SB_WORKER_OFFLINE);
}
