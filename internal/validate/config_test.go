package validate_test

import (
	"errors"
	"testing"
	"time"

	"github.com/coordd/coordd/internal/validate"
)

// TestChecks: each check records an error naming its key only when the
// value is bad, and an error already recorded (a value two sections share)
// is recorded once.
func TestChecks(t *testing.T) {
	tests := []struct {
		name  string
		check func(*validate.Checks)
		want  string // "": no error
	}{
		{"positive", func(v *validate.Checks) { v.Positive("k", time.Second) }, ""},
		{"not positive", func(v *validate.Checks) { v.Positive("k", 0) }, "k: must be positive, got 0s"},
		{"at least 1", func(v *validate.Checks) { v.AtLeast1("k", 1) }, ""},
		{"below 1", func(v *validate.Checks) { v.AtLeast1("k", 0) }, "k: must be at least 1, got 0"},
		{"no limit", func(v *validate.Checks) { v.Unlimited0("k", 0) }, ""},
		{"negative limit", func(v *validate.Checks) { v.Unlimited0("k", -2) }, "k: must not be negative (0: no limit), got -2"},
		{"ordered", func(v *validate.Checks) { v.Ordered("lo", time.Second, "hi", time.Second) }, ""},
		{"out of order", func(v *validate.Checks) { v.Ordered("lo", 2*time.Second, "hi", time.Second) }, "lo: (2s) must not exceed hi (1s)"},
		{"bad", func(v *validate.Checks) { v.Bad("k", "is %q", "x") }, `k: is "x"`},
		{"add nil", func(v *validate.Checks) { v.Add(nil) }, ""},
		{"two", func(v *validate.Checks) { v.Bad("a", "x"); v.Bad("b", "y") }, "a: x\nb: y"},
		{"once", func(v *validate.Checks) {
			v.Bad("a", "x")
			v.Add(errors.Join(errors.New("a: x"), errors.New("b: y")))
			v.Add(errors.New("b: y"))
		}, "a: x\nb: y"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v validate.Checks
			tt.check(&v)
			err := v.Err()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Err() = %v, want nil", err)
				}
				return
			}
			if err == nil || err.Error() != tt.want || validate.IsFieldError(err) {
				t.Fatalf("Err() = %v, want %q (not a *FieldError)", err, tt.want)
			}
		})
	}
}
