package dispatch

import (
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/switchyard-ai/switchyard/shared/apierr"
)

// DataError is the 400 for a value PostgreSQL refused as invalid data — SQLSTATE class 22:
// a NUL character, invalid Unicode, a number out of range, text too long. The request is
// at fault, not the database, and sending it again cannot help, so it must never be
// DATABASE_UNAVAILABLE ("safe to retry"). Requests are checked before anything is written;
// this is the safety net for whatever those checks miss. field names the field when the
// caller knows it ("" for the body). DataError returns nil for any other error.
func DataError(err error, field string) *apierr.Error {
	var pg *pgconn.PgError
	if !errors.As(err, &pg) || !strings.HasPrefix(pg.Code, "22") {
		return nil
	}
	if field == "" {
		field = "$"
	}
	return ValidationFailed([]FieldError{{Field: field, Rule: "data", Message: dataMessage(pg.Code)}}).
		With("sqlstate", pg.Code).Wrap(err)
}

// dataMessage says what is wrong with a value PostgreSQL refused with code, in the
// caller's terms (PostgreSQL's own text may quote the value).
func dataMessage(code string) string {
	switch code {
	case "22P05", "22021": // untranslatable_character, character_not_in_repertoire
		return `holds a character that cannot be stored: the NUL character (\u0000) or text that is not valid Unicode`
	case "22P02": // invalid_text_representation (also an unpaired surrogate escape in JSON)
		return `holds text that cannot be read as its type (in JSON: an unpaired \ud800-\udfff escape)`
	case "22003": // numeric_value_out_of_range
		return "holds a number out of the range that can be stored"
	case "22001": // string_data_right_truncation
		return "is longer than can be stored"
	case "22007", "22008": // invalid_datetime_format, datetime_field_overflow
		return "holds a date or time that is not valid"
	}
	return "holds a value that cannot be stored"
}
