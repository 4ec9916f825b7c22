package server

import (
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/coordd/coordd/internal/validate"
)

// The wire's side of validation: a Duration field that is unset becomes 0,
// which the domain packages read as "the default"; one that is set must be a
// valid Duration and, for TTLs, periods and timeouts, positive — so that an
// explicit 0 is an error, not a silent default. Bounds are the domain's.

// positive converts a TTL-like field: unset is 0, set must be > 0.
func positive(field string, d *durationpb.Duration) (time.Duration, error) {
	if d == nil {
		return 0, nil
	}
	v, err := duration(field, d)
	if err == nil && v <= 0 {
		err = validate.Errorf(field, "is %v; it must be positive (leave it unset for the default)", v)
	}
	return v, err
}

// nonNegative converts a wait or delay: unset is 0, set must be >= 0.
func nonNegative(field string, d *durationpb.Duration) (time.Duration, error) {
	if d == nil {
		return 0, nil
	}
	v, err := duration(field, d)
	if err == nil && v < 0 {
		err = validate.Errorf(field, "is %v; it must not be negative", v)
	}
	return v, err
}

func duration(field string, d *durationpb.Duration) (time.Duration, error) {
	if err := d.CheckValid(); err != nil {
		return 0, validate.Errorf(field, "is not a valid Duration: %v", err)
	}
	return d.AsDuration(), nil
}

// timestamp converts a time; the zero time is unset.
func timestamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

// required converts a field that must be set and positive.
func required(field string, d *durationpb.Duration) (time.Duration, error) {
	if d == nil {
		return 0, validate.Errorf(field, "is required")
	}
	return positive(field, d)
}
