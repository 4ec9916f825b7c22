package envoyrl

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Error is a problem at one line of one configuration file.
type Error struct {
	File string
	// Line is 1-based. It is 0 only when the YAML parser itself refused the
	// file: its message then carries the line ("yaml: line 3: ...").
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return e.File + ": " + e.Msg
	}
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}

// envoyKeys are the keys envoy ratelimit's validateYamlKeys accepts
// anywhere in a file, plus coordd's algorithm. A key outside this set is
// "unknown"; a key of the set in the wrong mapping is "misplaced".
var envoyKeys = []string{
	"domain", "key", "value", "descriptors", "rate_limit", "unit",
	"requests_per_unit", "unlimited", "shadow_mode", "quota_mode", "name",
	"replaces", "detailed_metric", "value_to_metric", "share_threshold",
	"algorithm",
}

// The keys each kind of mapping may hold.
var (
	rootKeys       = []string{"domain", "descriptors"}
	descriptorKeys = []string{"key", "value", "rate_limit", "descriptors", "shadow_mode", "quota_mode", "detailed_metric", "value_to_metric", "share_threshold"}
	rateLimitKeys  = []string{"unit", "requests_per_unit", "unlimited", "name", "replaces", "algorithm"}
	replacesKeys   = []string{"name"}
)

// reader reads one file's YAML nodes as envoy ratelimit's decoder
// (gopkg.in/yaml.v2, whose plain scalars follow YAML 1.1) reads them: it
// refuses what that decoder and validateYamlKeys refuse and, stricter, what
// they would silently drop (a duplicate key, a misplaced key).
type reader struct {
	file  string
	nodes *int // nodes read so far, aliases followed: at most maxNodes
}

// maxNodes bounds the nodes of one file, counted as read, each alias's
// target again at every use: a few kilobytes of nested aliases expand
// exponentially (envoy ratelimit's decoder refuses "excessive aliasing"
// too), and a load or reload must not stall on them.
const maxNodes = 1_000_000

func (r reader) errorf(line int, format string, args ...any) error {
	return &Error{File: r.file, Line: line, Msg: fmt.Sprintf(format, args...)}
}

// field is one key of a mapping and its value; val is nil when the key is
// absent, which every getter reads as YAML null.
type field struct {
	line int // of the key, or of the mapping when the key is absent
	val  *yaml.Node
}

// node resolves aliases and refuses explicit tags (!!str, !foo), which
// nothing in envoy ratelimit's configuration needs.
func (r reader) node(n *yaml.Node) (*yaml.Node, error) {
	if *r.nodes++; *r.nodes > maxNodes {
		return nil, r.errorf(n.Line, "the file expands to more than %d YAML nodes (through aliases, which are read again at every use)", maxNodes)
	}
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Style&yaml.TaggedStyle != 0 {
		return nil, r.errorf(n.Line, "explicit YAML tag %s is not supported", n.Tag)
	}
	return n, nil
}

// mapping returns the fields of mapping n, which may hold only the allowed
// keys. what names the mapping in errors ("a descriptor").
func (r reader) mapping(n *yaml.Node, what string, allowed []string) (map[string]field, error) {
	n, err := r.node(n)
	if err != nil {
		return nil, err
	}
	if n.Kind != yaml.MappingNode {
		return nil, r.errorf(n.Line, "%s must be a mapping", what)
	}
	fields := make(map[string]field, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, err := r.node(n.Content[i])
		if err != nil {
			return nil, err
		}
		if k.Kind != yaml.ScalarNode {
			return nil, r.errorf(k.Line, "config error, key is not of type string: a list or mapping")
		}
		if k.Style == 0 && plainKind(k.Value) != kindString {
			return nil, r.errorf(k.Line, "config error, key is not of type string: %s", k.Value)
		}
		name := k.Value
		if name == "<<" && k.Style == 0 {
			return nil, r.errorf(k.Line, "YAML merge keys (<<) are not supported: write the keys out (an alias *name for a whole value works)")
		}
		if !slices.Contains(envoyKeys, name) {
			return nil, r.errorf(k.Line, "config error, unknown key '%s'", name)
		}
		if !slices.Contains(allowed, name) {
			return nil, r.errorf(k.Line, "key '%s' does not belong in %s (envoy ratelimit would silently ignore it here)", name, what)
		}
		if first, dup := fields[name]; dup {
			return nil, r.errorf(k.Line, "duplicate key '%s' in %s (first at line %d)", name, what, first.line)
		}
		v, err := r.node(n.Content[i+1])
		if err != nil {
			return nil, err
		}
		fields[name] = field{line: k.Line, val: v}
	}
	return fields, nil
}

// isNull reports whether f is absent or YAML null.
func isNull(f field) bool {
	return f.val == nil || (f.val.Kind == yaml.ScalarNode && f.val.Style == 0 && plainKind(f.val.Value) == kindNull)
}

// str reads a string field: any scalar but a float or an integer beyond
// int64 (validateYamlKeys refuses those), taken as written (yes stays
// "yes", 010 stays "010"); null is "".
func (r reader) str(name string, f field) (string, error) {
	if isNull(f) {
		return "", nil
	}
	if f.val.Kind != yaml.ScalarNode {
		return "", r.errorf(f.val.Line, "%s must be a string", name)
	}
	if f.val.Style == 0 {
		switch plainKind(f.val.Value) {
		case kindFloat, kindBigInt:
			return "", r.errorf(f.val.Line, "%s %s is read as a number envoy ratelimit refuses (a float, or an integer beyond int64): quote it", name, f.val.Value)
		}
	}
	return f.val.Value, nil
}

// boolean reads a bool field: a plain YAML 1.1 boolean (true, yes, on, y,
// false, no, off, n, in their capitalisations); null is false.
func (r reader) boolean(name string, f field) (bool, error) {
	if isNull(f) {
		return false, nil
	}
	if f.val.Kind == yaml.ScalarNode && f.val.Style == 0 && plainKind(f.val.Value) == kindBool {
		return plainBool(f.val.Value), nil
	}
	return false, r.errorf(f.val.Line, "%s must be true or false, not %q", name, f.val.Value)
}

// uint32 reads an unsigned 32-bit field: a plain YAML 1.1 integer (10,
// 0x0a, 012 octal, 1_000) in range. ok is false for an absent or null field.
func (r reader) uint32(name string, f field) (v uint32, ok bool, err error) {
	if isNull(f) {
		return 0, false, nil
	}
	if f.val.Kind == yaml.ScalarNode && f.val.Style == 0 && plainKind(f.val.Value) == kindInt {
		i, _ := strconv.ParseInt(strings.ReplaceAll(f.val.Value, "_", ""), 0, 64)
		if i >= 0 && i <= 1<<32-1 {
			return uint32(i), true, nil
		}
	}
	return 0, false, r.errorf(f.val.Line, "%s must be an integer from 0 to 4294967295, not %q", name, f.val.Value)
}

// list reads a list of mappings; null is empty. It returns the items
// unresolved so that an error can name the line where an alias is used.
func (r reader) list(name string, f field) ([]*yaml.Node, error) {
	if isNull(f) {
		return nil, nil
	}
	if f.val.Kind != yaml.SequenceNode {
		return nil, r.errorf(f.val.Line, "%s must be a list", name)
	}
	for _, item := range f.val.Content {
		n, err := r.node(item)
		if err != nil {
			return nil, err
		}
		if n.Kind != yaml.MappingNode {
			return nil, r.errorf(item.Line, "config error, yaml file contains list of type other than map: %s", n.Value)
		}
	}
	return f.val.Content, nil
}

// scalarKind is what gopkg.in/yaml.v2 makes of a plain (unquoted) scalar.
type scalarKind int

const (
	kindString scalarKind = iota
	kindNull
	kindBool
	kindInt    // fits int64
	kindBigInt // fits only uint64: validateYamlKeys refuses it
	kindFloat  // validateYamlKeys refuses it
)

// yaml11Float is yaml.v2's pattern of a decimal float.
var yaml11Float = regexp.MustCompile(`^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`)

// plainKind resolves a plain scalar as yaml.v2 does. Its timestamps are
// left out: decoded into a string or an interface{} they stay strings.
func plainKind(s string) scalarKind {
	switch s {
	case "", "~", "null", "Null", "NULL":
		return kindNull
	case "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON",
		"n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF":
		return kindBool
	case ".nan", ".NaN", ".NAN", ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF":
		return kindFloat
	}
	switch c := s[0]; {
	case c == '.':
		if _, err := strconv.ParseFloat(s, 64); err == nil {
			return kindFloat
		}
	case c == '+' || c == '-' || ('0' <= c && c <= '9'):
		plain := strings.ReplaceAll(s, "_", "")
		if _, err := strconv.ParseInt(plain, 0, 64); err == nil {
			return kindInt
		}
		if _, err := strconv.ParseUint(plain, 0, 64); err == nil {
			return kindBigInt
		}
		if yaml11Float.MatchString(plain) {
			if _, err := strconv.ParseFloat(plain, 64); err == nil {
				return kindFloat
			}
		}
	}
	return kindString
}

// plainBool is the value of a scalar of kindBool.
func plainBool(s string) bool {
	switch s {
	case "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON":
		return true
	}
	return false
}
