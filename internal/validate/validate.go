// Package validate holds the rules every request field is checked against
// and the error that names the field that broke one. internal/server maps a
// *FieldError to INVALID_ARGUMENT.
package validate

import (
	"errors"
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/coordd/coordd/internal/token"
)

// FieldError says which request field is invalid and why.
type FieldError struct {
	Field  string // the API's field name, e.g. "ttl" or "limit.period"
	Reason string
	// Limit, if not zero, is the bound the value went past (Wait's max):
	// sent to the client in ErrorInfo's metadata "limit", so that a client
	// can keep under it without parsing Reason.
	Limit time.Duration
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// Errorf returns a *FieldError for field.
func Errorf(field, format string, args ...any) error {
	return &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// IsFieldError reports whether err is (or wraps) a *FieldError.
func IsFieldError(err error) bool {
	var fe *FieldError
	return errors.As(err, &fe)
}

// Name checks a name, key or queue name: 1 to max bytes of UTF-8 without
// control characters or format characters (see Label).
func Name(field, s string, max int) error {
	if s == "" {
		return Errorf(field, "is required")
	}
	return Label(field, s, max)
}

// Label checks an optional label: at most max bytes of UTF-8 without control
// characters (Unicode Cc) or format characters (Unicode Cf: the
// bidirectional overrides and isolates such as U+202E, the zero-width
// characters such as U+200B and U+2060, the byte order mark U+FEFF, the
// soft hyphen U+00AD, tags), which would let a name look like another one,
// or reorder the text around it, in a log line or a UI.
func Label(field, s string, max int) error {
	if len(s) > max {
		return Errorf(field, "is %d bytes long; the limit is %d", len(s), max)
	}
	if !utf8.ValidString(s) {
		return Errorf(field, "is not valid UTF-8")
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return Errorf(field, "contains the control character %U", r)
		}
		if unicode.Is(unicode.Cf, r) {
			return Errorf(field, "contains the invisible format character %U (bidirectional or zero-width)", r)
		}
	}
	return nil
}

// Text checks free text for humans: at most max bytes of UTF-8 (line breaks
// and other control characters allowed).
func Text(field, s string, max int) error {
	if len(s) > max {
		return Errorf(field, "is %d bytes long; the limit is %d", len(s), max)
	}
	if !utf8.ValidString(s) {
		return Errorf(field, "is not valid UTF-8")
	}
	return nil
}

// Token checks a token coordd handed out (32 lowercase hex digits).
func Token(field, s string) error {
	if s == "" {
		return Errorf(field, "is required")
	}
	if !token.Valid(s) {
		return Errorf(field, "is malformed: want the 32 hex digits coordd returned")
	}
	return nil
}

// MinDuration is the shortest TTL, period or timeout accepted.
const MinDuration = time.Millisecond

// Duration checks a duration that must lie in [MinDuration, max].
func Duration(field string, d, max time.Duration) error {
	switch {
	case d < MinDuration:
		return Errorf(field, "is %v; it must be at least %v", d, MinDuration)
	case d > max:
		return &FieldError{Field: field, Reason: fmt.Sprintf("is %v; the limit is %v", d, max), Limit: max}
	}
	return nil
}

// Wait checks a wait or delay: 0 to max. Over max, the error carries max
// as its Limit.
func Wait(field string, d, max time.Duration) error {
	switch {
	case d < 0:
		return Errorf(field, "is %v; it must not be negative", d)
	case d > max:
		return &FieldError{Field: field, Reason: fmt.Sprintf("is %v; the limit is %v", d, max), Limit: max}
	}
	return nil
}

// Bytes checks that a payload is at most max bytes.
func Bytes(field string, b []byte, max int) error {
	if len(b) > max {
		return Errorf(field, "is %d bytes long; the limit is %d", len(b), max)
	}
	return nil
}
