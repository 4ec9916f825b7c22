package version

import (
	"runtime"
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	i := Get()
	if i.GoVersion != runtime.Version() || i.Version == "" || i.Revision == "" {
		t.Fatalf("Get() = %+v", i)
	}
	s := String("coordd")
	if !strings.HasPrefix(s, "coordd "+i.Version+" (revision "+i.Revision) || !strings.HasSuffix(s, runtime.Version()+")") {
		t.Fatalf("String = %q", s)
	}
}
