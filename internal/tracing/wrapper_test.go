package tracing

import (
	"reflect"
	"testing"
)

// TestTracedEmbedsNoStore: the traced store writes out every method of
// store.Store (a method promoted from an embedded store would run without
// a span, and a new method of the interface would compile without one).
func TestTracedEmbedsNoStore(t *testing.T) {
	rt := reflect.TypeOf(traced{})
	for i := 0; i < rt.NumField(); i++ {
		if rt.Field(i).Anonymous {
			t.Errorf("traced embeds %s: its methods would have no span", rt.Field(i).Type)
		}
	}
}
