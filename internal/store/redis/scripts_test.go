package redis

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestScriptDeclarations: every script's KEYS and ARGV are bound by name
// in one place, its header (scripts.go): no Lua file reads KEYS or ARGV by
// number, every name a script binds is used and not declared again by the
// script or its preludes, and argv lists a struct's values in the order
// of its fields, which is the order the header binds them in. So the Go side and the Lua side cannot drift apart unnoticed.
func TestScriptDeclarations(t *testing.T) {
	files, err := luaFiles.ReadDir("lua")
	if err != nil {
		t.Fatal(err)
	}
	byNumber := regexp.MustCompile(`\b(KEYS|ARGV)\[`)
	for _, f := range files {
		for i, line := range strings.Split(lua(strings.TrimSuffix(f.Name(), ".lua")), "\n") {
			code, _, _ := strings.Cut(line, "--")
			if byNumber.MatchString(code) {
				t.Errorf("lua/%s:%d reads KEYS or ARGV by number: %s", f.Name(), i+1, strings.TrimSpace(line))
			}
		}
	}
	if len(allScripts) < 30 {
		t.Fatalf("%d scripts registered; the registry must be broken", len(allScripts))
	}
	for _, sc := range allScripts {
		h := header(sc.keys, sc.args)
		body, ok := strings.CutPrefix(sc.src, h)
		if !ok {
			t.Errorf("%s: its source does not start with its header", sc.name)
			continue
		}
		code := stripComments(body)
		var bound []string
		for _, k := range sc.keys {
			bound = append(bound, strings.TrimSuffix(k, "..."))
		}
		for _, a := range sc.args {
			bound = append(bound, a.name)
		}
		for _, name := range bound {
			if !regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\b`).MatchString(code) {
				t.Errorf("%s binds %s, which it never uses", sc.name, name)
			}
			if regexp.MustCompile(`(?m)^local\s+(\w+\s*,\s*)*` + regexp.QuoteMeta(name) + `\b`).MatchString(code) {
				t.Errorf("%s declares %s again at the top level, hiding the bound one", sc.name, name)
			}
		}
		checkArgv(t, sc)
	}
}

// checkArgv fills sc's arguments struct with a distinct value per field
// (two passes, so that two booleans swapped show in one of them) and
// checks that argv lists them in field order, rest fields expanded.
func checkArgv(t *testing.T, sc *script) {
	t.Helper()
	for pass := range 2 {
		v := reflect.New(sc.argsType).Elem()
		var want []string
		n := 0
		var fill func(v reflect.Value)
		fill = func(v reflect.Value) {
			for i := 0; i < v.NumField(); i++ {
				f := v.Field(i)
				if v.Type().Field(i).Anonymous {
					fill(f)
					continue
				}
				n++
				switch f.Kind() {
				case reflect.String:
					f.SetString(fmt.Sprint("v", n))
				case reflect.Int, reflect.Int64:
					f.SetInt(int64(100 + n))
				case reflect.Uint64:
					f.SetUint(uint64(100 + n))
				case reflect.Bool:
					f.SetBool((n+pass)%2 == 0)
				case reflect.Slice:
					switch f.Type().Elem().Kind() {
					case reflect.String:
						f.Set(reflect.ValueOf([]string{fmt.Sprint("r", n, "a"), fmt.Sprint("r", n, "b")}))
					case reflect.Int64:
						f.Set(reflect.ValueOf([]int64{int64(1000 + 10*n), int64(1001 + 10*n)}))
					}
				default:
					t.Fatalf("%s: field %s of kind %s", sc.name, v.Type().Field(i).Name, f.Kind())
				}
				if f.Kind() == reflect.Slice {
					for j := 0; j < f.Len(); j++ {
						want = append(want, fmt.Sprint(f.Index(j).Interface()))
					}
				} else {
					want = append(want, fmt.Sprint(f.Interface()))
				}
			}
		}
		fill(v)
		var got []string
		for _, a := range sc.argv(nil, v.Interface()) {
			got = append(got, fmt.Sprint(a))
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s: argv(%s) = %v, want the fields in order: %v", sc.name, sc.argsType.Name(), got, want)
		}
	}
}

// stripComments removes Lua's -- comments (none of coordd's strings
// contain "--").
func stripComments(src string) string {
	var b strings.Builder
	for _, line := range strings.Split(src, "\n") {
		code, _, _ := strings.Cut(line, "--")
		b.WriteString(code)
		b.WriteByte('\n')
	}
	return b.String()
}

// TestArgvOfAnotherType: a script given another script's arguments is a
// programming bug, caught at the call, not a silent misbinding.
func TestArgvOfAnotherType(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "takes redis.idemFinishArgs, not redis.idemBeginArgs") {
			t.Errorf("recovered %v", r)
		}
	}()
	idemFinish.argv(nil, idemBeginArgs{})
}

// TestScriptSource: the exported source is the one the store runs, and
// the arguments are the struct's tags in order.
func TestScriptSource(t *testing.T) {
	src, args, ok := ScriptSource("idem_finish")
	if !ok || src != idemFinish.src {
		t.Fatalf("ScriptSource(idem_finish): ok %v, same source %v", ok, src == idemFinish.src)
	}
	if want := []string{"owner", "state", "outcome", "ttl,int", "channel"}; !slices.Equal(args, want) {
		t.Errorf("arguments %q, want %q", args, want)
	}
	if _, _, ok := ScriptSource("no_such_script"); ok {
		t.Error("ScriptSource found a script that does not exist")
	}
}

// TestArgvTimeFirst: the time arguments lead, as the header reads them
// (ARGV[1], ARGV[2]), and the script's own follow.
func TestArgvTimeFirst(t *testing.T) {
	got := fmt.Sprint(idemExtend.argv([]any{int64(7), int64(0)}, idemExtendArgs{Owner: "o", TTL: 5}))
	if got != "[7 0 o 5]" {
		t.Errorf("argv = %s, want [7 0 o 5]", got)
	}
}
