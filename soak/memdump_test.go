package soak

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"unsafe"

	"github.com/coordd/coordd/internal/store/memory"
)

// memDump describes the records a memory store holds, by kind, with a few
// of each: the evidence when Len() is not 0 at the end. It reads the
// store's unexported fields by reflection, under the store's own mutexes;
// it knows the field names of internal/store/memory (store.go, queue.go,
// limits.go), and says so if they changed.
func memDump(s *memory.Store) (out string) {
	defer func() {
		if p := recover(); p != nil {
			out = fmt.Sprintf("(cannot read the memory store's fields: %v)", p)
		}
	}()
	var b strings.Builder
	v := reflect.ValueOf(s).Elem()
	field := func(v reflect.Value, name string) reflect.Value {
		f := v.FieldByName(name)
		if !f.IsValid() {
			panic("no field " + name)
		}
		return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
	}
	mutex := func(v reflect.Value, name string) *sync.Mutex { return field(v, name).Addr().Interface().(*sync.Mutex) }
	dump := func(kind string, m reflect.Value) {
		if m.Len() == 0 {
			return
		}
		fmt.Fprintf(&b, "  %d %s:\n", m.Len(), kind)
		n := 0
		for it := m.MapRange(); it.Next() && n < 5; n++ {
			val := it.Value()
			if val.Kind() == reflect.Pointer {
				val = val.Elem()
			}
			fmt.Fprintf(&b, "    %+v: %+v\n", it.Key(), val)
		}
	}

	lk := mutex(v, "lk")
	lk.Lock()
	dump("holds", field(v, "holds"))
	dump("sessions", field(v, "sessions"))
	lk.Unlock()

	limits := field(v, "limits")
	for i := range limits.Len() {
		sh := limits.Index(i)
		mu := mutex(sh, "mu")
		mu.Lock()
		dump(fmt.Sprintf("rate-limit states (shard %d)", i), field(sh, "m"))
		mu.Unlock()
	}

	im := mutex(v, "im")
	im.Lock()
	dump("idempotency keys", field(v, "idem"))
	im.Unlock()

	qm := mutex(v, "qm")
	qm.Lock()
	queues := field(v, "queues")
	var recs []reflect.Value
	var names []string
	for it := queues.MapRange(); it.Next(); {
		names = append(names, it.Key().String())
		recs = append(recs, it.Value().Elem())
	}
	qm.Unlock()
	for i, q := range recs {
		mu := mutex(q, "mu")
		mu.Lock()
		dump("messages of queue "+names[i], field(q, "msgs"))
		dump("dedup entries of queue "+names[i], field(q, "dedup"))
		mu.Unlock()
	}
	if b.Len() == 0 {
		return "  nothing"
	}
	return b.String()
}
