/*  schemas/elicit.c — an elicitation's requested schema and the content
    that answers it, checked (schemas/elicit.h).
*/
#include "schemas/elicit.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/*  The schema */

//  A string member `key` of `o`, when there, within SB_ELICIT_TEXT_MAX.
static bool
s_text_ok (json_t *o, const char *key)
{
    json_t *v = json_object_get (o, key);
    return !v || (json_is_string (v) && json_string_length (v) <= SB_ELICIT_TEXT_MAX);
}

//  Whether `v` is a value of the property `p` (type, enum, bounds).
static bool
s_value_ok (json_t *p, json_t *v, char *why, size_t whylen)
{
    const char *type = json_string_value (json_object_get (p, "type"));
    if (strcmp (type, "boolean") == 0) {
        if (!json_is_boolean (v))
            return snprintf (why, whylen, "is not a boolean"), false;
        return true;
    }
    if (strcmp (type, "string") == 0) {
        if (!json_is_string (v) || json_string_length (v) > SB_ELICIT_TEXT_MAX)
            return snprintf (why, whylen, "is not a string of at most %d bytes", SB_ELICIT_TEXT_MAX), false;
        json_t *en = json_object_get (p, "enum");
        if (en) {
            size_t k;
            json_t *m;
            json_array_foreach (en, k, m)
                if (json_equal (m, v))
                    return true;
            return snprintf (why, whylen, "is not one of its choices"), false;
        }
        //  Lengths in bytes: close enough to the schema's characters for a bound.
        json_int_t n = (json_int_t) json_string_length (v);
        json_t *lo = json_object_get (p, "minLength"), *hi = json_object_get (p, "maxLength");
        if ((lo && n < json_integer_value (lo)) || (hi && n > json_integer_value (hi)))
            return snprintf (why, whylen, "has a length outside its bounds"), false;
        return true;
    }
    //  number or integer
    if (!json_is_number (v) || (strcmp (type, "integer") == 0 && !json_is_integer (v)))
        return snprintf (why, whylen, "is not %s", strcmp (type, "integer") == 0 ? "an integer" : "a number"), false;
    double d = json_number_value (v);
    json_t *lo = json_object_get (p, "minimum"), *hi = json_object_get (p, "maximum");
    if ((lo && d < json_number_value (lo)) || (hi && d > json_number_value (hi)))
        return snprintf (why, whylen, "is outside its bounds"), false;
    return true;
}

//  One property's schema: a primitive type with bounded annotations.
static int
s_property_check (const char *name, json_t *p, char *err, size_t errlen)
{
    if (strlen (name) == 0 || strlen (name) > SB_ELICIT_NAME_MAX)
        return snprintf (err, errlen, "a property name is empty or over %d bytes", SB_ELICIT_NAME_MAX), -1;
    const char *type = json_is_object (p) ? json_string_value (json_object_get (p, "type")) : NULL;
    if (!type || (strcmp (type, "string") && strcmp (type, "number") && strcmp (type, "integer")
               && strcmp (type, "boolean")))
        return snprintf (err, errlen, "property '%s': not a string, number, integer or boolean (the primitive "
                         "types elicitation allows)", name), -1;
    if (!s_text_ok (p, "title") || !s_text_ok (p, "description") || !s_text_ok (p, "format"))
        return snprintf (err, errlen, "property '%s': a title, description or format that is not a short string",
                         name), -1;
    json_t *en = json_object_get (p, "enum");
    if (en) {
        if (strcmp (type, "string") || !json_is_array (en) || json_array_size (en) == 0
        ||  json_array_size (en) > SB_ELICIT_ENUM_MAX)
            return snprintf (err, errlen, "property '%s': an enum is 1 to %d strings", name, SB_ELICIT_ENUM_MAX),
                   -1;
        size_t k;
        json_t *m;
        json_array_foreach (en, k, m)
            if (!json_is_string (m) || json_string_length (m) > SB_ELICIT_TEXT_MAX)
                return snprintf (err, errlen, "property '%s': an enum member is not a short string", name), -1;
        json_t *names = json_object_get (p, "enumNames");
        if (names && (!json_is_array (names) || json_array_size (names) != json_array_size (en)))
            return snprintf (err, errlen, "property '%s': enumNames does not match its enum", name), -1;
        json_array_foreach (names, k, m)
            if (!json_is_string (m) || json_string_length (m) > SB_ELICIT_TEXT_MAX)
                return snprintf (err, errlen, "property '%s': an enum name is not a short string", name), -1;
    }
    const char *ints [] = { "minLength", "maxLength" }, *nums [] = { "minimum", "maximum" };
    for (size_t k = 0; k < 2; k++) {
        json_t *v = json_object_get (p, ints [k]);
        if (v && (!json_is_integer (v) || json_integer_value (v) < 0))
            return snprintf (err, errlen, "property '%s': %s is not a non-negative integer", name, ints [k]), -1;
        v = json_object_get (p, nums [k]);
        if (v && (!json_is_number (v) || !isfinite (json_number_value (v))))
            return snprintf (err, errlen, "property '%s': %s is not a number", name, nums [k]), -1;
    }
    json_t *def = json_object_get (p, "default");
    char why [96];
    if (def && !s_value_ok (p, def, why, sizeof why))
        return snprintf (err, errlen, "property '%s': its default %s", name, why), -1;
    return 0;
}

int
sb_elicit_schema_check (json_t *schema, char *err, size_t errlen)
{
    const char *type = json_string_value (json_object_get (schema, "type"));
    json_t *props = json_object_get (schema, "properties");
    if (!json_is_object (schema) || !type || strcmp (type, "object") || !json_is_object (props))
        return snprintf (err, errlen, "the requested schema is not an object with properties"), -1;
    if (json_object_size (props) > SB_ELICIT_FIELDS_MAX)
        return snprintf (err, errlen, "the requested schema has over %d properties", SB_ELICIT_FIELDS_MAX), -1;
    const char *name;
    json_t *p;
    json_object_foreach (props, name, p)
        if (s_property_check (name, p, err, errlen) != 0)
            return -1;
    json_t *req = json_object_get (schema, "required");
    if (req && !json_is_array (req))
        return snprintf (err, errlen, "the requested schema's required is not an array"), -1;
    size_t k;
    json_t *r;
    json_array_foreach (req, k, r)
        if (!json_is_string (r) || !json_object_get (props, json_string_value (r)))
            return snprintf (err, errlen, "the requested schema requires a property it does not have"), -1;
    return 0;
}


/* ------------------------------------------------------------------ */
/*  The answer */

json_t *
sb_elicit_content (json_t *schema, json_t *given, char *err, size_t errlen)
{
    if (!json_is_object (given))
        return snprintf (err, errlen, "the content is not a JSON object"), NULL;
    json_t *props = json_object_get (schema, "properties");
    const char *name;
    json_t *v;
    json_object_foreach (given, name, v)
        if (!json_object_get (props, name))
            return snprintf (err, errlen, "'%.64s' is not one of the fields asked for", name), NULL;
    json_t *out = json_object ();
    json_t *p;
    char why [96];
    json_object_foreach (props, name, p) {
        v = json_object_get (given, name);
        if (!v)
            v = json_object_get (p, "default");
        if (!v)
            continue;
        if (!s_value_ok (p, v, why, sizeof why)) {
            json_decref (out);
            return snprintf (err, errlen, "'%s' %s", name, why), NULL;
        }
        json_object_set (out, name, v);
    }
    size_t k;
    json_t *r;
    json_array_foreach (json_object_get (schema, "required"), k, r)
        if (!json_object_get (out, json_string_value (r))) {
            json_decref (out);
            return snprintf (err, errlen, "'%s' is required", json_string_value (r)), NULL;
        }
    return out;
}
