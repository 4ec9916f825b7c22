package validate

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Checks collects the errors of a configuration check, each naming the key
// it is about ("lock.max_ttl: must be positive, got 0s"), so that one run
// reports every bad value, not only the first. Its zero value is ready.
// These are errors for an operator, not a client: not *FieldError.
type Checks struct{ errs []error }

// Bad records that key's value is wrong: "key: <format>", a *KeyError.
func (c *Checks) Bad(key, format string, args ...any) {
	c.Add(&KeyError{Key: key, Msg: fmt.Sprintf(format, args...)})
}

// KeyError is a bad configuration value: the key it is about (lock.max_ttl,
// ratelimit.policies[0].limit) and what is wrong with it. The daemon's
// loader finds it with errors.As to say where the value came from.
type KeyError struct {
	Key string
	Msg string
}

func (e *KeyError) Error() string { return e.Key + ": " + e.Msg }

// Add records err (nil: nothing), or each error of a joined one, leaving out
// any already recorded: sections that share a value (limits.max_wait is
// every waiting section's) would otherwise each report it.
func (c *Checks) Add(err error) {
	if err == nil {
		return
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			c.Add(e)
		}
		return
	}
	if !slices.ContainsFunc(c.errs, func(e error) bool { return e.Error() == err.Error() }) {
		c.errs = append(c.errs, err)
	}
}

// Positive checks that d is above 0.
func (c *Checks) Positive(key string, d time.Duration) {
	if d <= 0 {
		c.Bad(key, "must be positive, got %v", d)
	}
}

// AtLeast1 checks that n is 1 or more.
func (c *Checks) AtLeast1(key string, n int64) {
	if n < 1 {
		c.Bad(key, "must be at least 1, got %d", n)
	}
}

// Unlimited0 checks a cap whose 0 means no limit: it must not be negative.
func (c *Checks) Unlimited0(key string, n int) {
	if n < 0 {
		c.Bad(key, "must not be negative (0: no limit), got %d", n)
	}
}

// Ordered checks that low does not exceed high.
func (c *Checks) Ordered(lowKey string, low time.Duration, highKey string, high time.Duration) {
	if low > high {
		c.Bad(lowKey, "(%v) must not exceed %s (%v)", low, highKey, high)
	}
}

// Err returns the errors recorded, joined (one a line), or nil.
func (c *Checks) Err() error { return errors.Join(c.errs...) }
