package redis

import (
	"context"
	"testing"
)

// openStore opens a Store with Open, as cmd/coordd does, on c (Mode, if
// unset, "cluster" for more than one address, else "standalone", so that
// Open does not probe), and closes it, with its client, when the test ends.
func openStore(t testing.TB, c Config) *Store {
	t.Helper()
	if c.Mode == "" {
		c.Mode = "standalone"
		if len(c.Addrs) > 1 {
			c.Mode = "cluster"
		}
	}
	s, err := Open(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
