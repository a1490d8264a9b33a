/*  tests/unit/test_session_usage.c — the days of session.usage's `since`
    (actors/session/usage.c): a UTC date as days since 1970-01-01. */
#include <criterion/criterion.h>

#include "actors/session/session_impl.h"

Test (session_usage, dates_are_days_since_the_epoch)
{
    cr_assert_eq (sb_session_usage_day ("1970-01-01"), 0);
    cr_assert_eq (sb_session_usage_day ("1970-01-02"), 1);
    cr_assert_eq (sb_session_usage_day ("2000-03-01"), 11017);
    cr_assert_eq (sb_session_usage_day ("2024-02-29"), 19782);
    cr_assert_eq (sb_session_usage_day ("2026-12-02"), 20789);
}

Test (session_usage, anything_but_a_date_is_refused)
{
    cr_assert_eq (sb_session_usage_day (NULL), -1);
    cr_assert_eq (sb_session_usage_day (""), -1);
    cr_assert_eq (sb_session_usage_day ("2026-13-01"), -1);
    cr_assert_eq (sb_session_usage_day ("2026-00-10"), -1);
    cr_assert_eq (sb_session_usage_day ("2026-01-32"), -1);
    cr_assert_eq (sb_session_usage_day ("1969-12-31"), -1);
    cr_assert_eq (sb_session_usage_day ("2026-1-01x"), -1);
    cr_assert_eq (sb_session_usage_day ("2026-01-01T00"), -1);
    cr_assert_eq (sb_session_usage_day ("yesterday!"), -1);
    cr_assert_eq (sb_session_usage_day ("2026-02- 1"), -1);
    cr_assert_eq (sb_session_usage_day ("+026-02-01"), -1);
}
