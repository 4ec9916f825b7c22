package envoyrl

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.yaml.in/yaml/v3"
)

// algorithms are the values of coordd's algorithm: key, beside unit in a rate_limit.
var algorithms = []string{"fixed_window", "sliding_window", "sliding_log", "token_bucket", "leaky_bucket"}

// Load reads every *.yaml and *.yml file under dir, subdirectories
// included, and returns their configuration, or the first problem as an
// *Error naming the file (dir joined with its path) and the line.
//
// dir plays the part of envoy ratelimit's $RUNTIME_ROOT/$RUNTIME_SUBDIRECTORY/config,
// whose files (every file of the tree) it loads. Load differs in two ways:
// it reads only .yaml and .yml files, and it skips every file and directory
// whose name starts with a dot (envoy's RUNTIME_IGNOREDOTFILES=true), so
// that editor droppings and the ..data and ..<timestamp> directories of a
// Kubernetes ConfigMap volume are not read twice. dir itself and files may
// be symbolic links; linked directories below dir are not followed.
func Load(dir string) (*Config, error) {
	fsys := os.DirFS(dir)
	files := map[string][]byte{}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != "." && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if ext := path.Ext(p); d.IsDir() || (ext != ".yaml" && ext != ".yml") {
			return nil
		}
		info, err := fs.Stat(fsys, p) // follows a symbolic link
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		files[filepath.Join(dir, filepath.FromSlash(p))] = data
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("envoyrl: reading %s: %w", dir, err)
	}
	return Parse(files)
}

// Parse is Load of files already read: file name to content. It reads the
// files in the order of their names, so that the error about a domain
// defined twice always names the same file.
func Parse(files map[string][]byte) (*Config, error) {
	c := &Config{domains: map[string]*domain{}}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		d, err := parseFile(name, files[name])
		if err != nil {
			return nil, err
		}
		// envoy ratelimit merges the files of one domain only with
		// MERGE_DOMAIN_CONFIG=true; its default, kept here, refuses them.
		if first, dup := c.domains[d.name]; dup {
			return nil, &Error{File: name, Line: d.line, Msg: fmt.Sprintf(
				"duplicate domain '%s' in config file (first in %s:%d)", d.name, first.file, first.line)}
		}
		c.domains[d.name] = d
		c.names = append(c.names, d.name)
	}
	slices.Sort(c.names)
	return c, nil
}

// parseFile reads the one domain of one file.
func parseFile(name string, data []byte) (*domain, error) {
	r := reader{file: name, nodes: new(int)}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	err := dec.Decode(&doc)
	if errors.Is(err, io.EOF) {
		return nil, r.errorf(1, "config file cannot have empty domain")
	}
	if err != nil {
		return nil, &Error{File: name, Msg: err.Error()}
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		return nil, r.errorf(next.Line, "a second YAML document: envoy ratelimit would read only the first; write one file per domain")
	case !errors.Is(err, io.EOF):
		return nil, &Error{File: name, Msg: err.Error()}
	}

	top := doc.Content[0]
	fields := map[string]field{}
	line := 1
	if !isNull(field{val: top}) {
		if fields, err = r.mapping(top, "the top level", rootKeys); err != nil {
			return nil, err
		}
		line = top.Line
	}
	domainName, err := r.str("domain", fields["domain"])
	if err != nil {
		return nil, err
	}
	if fields["domain"].line != 0 {
		line = fields["domain"].line
	}
	if domainName == "" {
		return nil, r.errorf(line, "config file cannot have empty domain")
	}
	descriptors, err := r.list("descriptors", fields["descriptors"])
	if err != nil {
		return nil, err
	}

	d := &domain{name: domainName, file: name, line: line}
	d.root.fullKey = domainName
	d.root.statKey = domainName
	b := builder{reader: r, names: map[string]bool{}}
	if err := b.descriptors(&d.root, descriptors); err != nil {
		return nil, err
	}
	for _, ref := range b.replaces {
		if !b.names[ref.name] {
			return nil, r.errorf(ref.line, "replaces names '%s', which no rate_limit of domain '%s' defines "+
				"(coordd refuses this; envoy ratelimit would accept it and replace nothing)", ref.name, domainName)
		}
	}
	return d, nil
}

// builder builds one domain's tree of descriptors.
type builder struct {
	reader
	names    map[string]bool // of the domain's rate limits
	replaces []replaceRef    // checked against names once the domain is read
}

type replaceRef struct {
	name string
	line int
}

// descriptors adds the descriptors of items under parent, as envoy
// ratelimit's loadDescriptors does.
func (b *builder) descriptors(parent *node, items []*yaml.Node) error {
	for _, item := range items {
		fields, err := b.mapping(item, "a descriptor", descriptorKeys)
		if err != nil {
			return err
		}
		n := &node{line: item.Line}
		if n.key, err = b.str("key", fields["key"]); err != nil {
			return err
		}
		if n.key == "" {
			return b.errorf(item.Line, "descriptor has empty key")
		}
		value, err := b.str("value", fields["value"])
		if err != nil {
			return err
		}
		n.mapKey = n.key
		if value != "" {
			n.mapKey += "_" + value
		}
		n.fullKey = parent.fullKey + "." + n.mapKey
		n.statKey = parent.statKey + "." + n.key
		if first, dup := parent.children[n.mapKey]; dup {
			return b.errorf(item.Line, "duplicate descriptor composite key '%s' (first at line %d)", n.fullKey, first.line)
		}

		var flags struct{ shadow, quota, detailed bool }
		for _, f := range []struct {
			name string
			to   *bool
		}{
			{"shadow_mode", &flags.shadow},
			{"quota_mode", &flags.quota},
			{"detailed_metric", &flags.detailed},
			{"value_to_metric", &n.valueToMetric},
			{"share_threshold", &n.shareThreshold},
		} {
			if *f.to, err = b.boolean(f.name, fields[f.name]); err != nil {
				return err
			}
		}
		if n.shareThreshold && !strings.HasSuffix(n.mapKey, "*") {
			return b.errorf(fields["share_threshold"].line,
				"share_threshold can only be used with wildcard values (ending with '*'), but found key '%s'", n.mapKey)
		}

		if !isNull(fields["rate_limit"]) {
			if n.limit, err = b.rateLimit(fields["rate_limit"].val); err != nil {
				return err
			}
			n.limit.FullKey = n.fullKey
			n.limit.StatKey = n.statKey
			n.limit.ShadowMode = flags.shadow
			n.limit.QuotaMode = flags.quota
			n.limit.DetailedMetric = flags.detailed
		}

		if parent.children == nil {
			parent.children = map[string]*node{}
		}
		parent.children[n.mapKey] = n
		if strings.HasSuffix(n.mapKey, "*") {
			parent.wildcards = append(parent.wildcards, n.mapKey)
		}
		children, err := b.list("descriptors", fields["descriptors"])
		if err != nil {
			return err
		}
		if err := b.descriptors(n, children); err != nil {
			return err
		}
	}
	return nil
}

// rateLimit reads a rate_limit mapping into a Limit without its keys and
// descriptor-level flags.
func (b *builder) rateLimit(m *yaml.Node) (*Limit, error) {
	fields, err := b.mapping(m, "a rate_limit", rateLimitKeys)
	if err != nil {
		return nil, err
	}
	l := &Limit{}
	if l.Unlimited, err = b.boolean("unlimited", fields["unlimited"]); err != nil {
		return nil, err
	}
	if l.Name, err = b.str("name", fields["name"]); err != nil {
		return nil, err
	}
	unit, err := b.str("unit", fields["unit"])
	if err != nil {
		return nil, err
	}
	rpu, hasRPU, err := b.uint32("requests_per_unit", fields["requests_per_unit"])
	if err != nil {
		return nil, err
	}
	if l.Algorithm, err = b.str("algorithm", fields["algorithm"]); err != nil {
		return nil, err
	}
	hasAlgorithm := !isNull(fields["algorithm"])

	if l.Unlimited {
		// envoy ratelimit refuses only a valid unit here and ignores the
		// rest; coordd refuses anything that would be ignored.
		switch {
		case !isNull(fields["unit"]):
			return nil, b.errorf(fields["unit"].line, "should not specify rate limit unit when unlimited")
		case hasRPU:
			return nil, b.errorf(fields["requests_per_unit"].line, "should not specify requests_per_unit when unlimited")
		case hasAlgorithm:
			return nil, b.errorf(fields["algorithm"].line, "should not specify algorithm when unlimited")
		}
	} else {
		v, ok := rlsv3.RateLimitResponse_RateLimit_Unit_value[strings.ToUpper(unit)]
		if !ok || v == int32(rlsv3.RateLimitResponse_RateLimit_UNKNOWN) {
			line := fields["unit"].line
			if line == 0 {
				line = m.Line
			}
			return nil, b.errorf(line, "invalid rate limit unit '%s'", unit)
		}
		if !hasRPU {
			return nil, b.errorf(m.Line, "rate_limit has no requests_per_unit (envoy ratelimit would read 0 and refuse every request; write requests_per_unit: 0 if that is meant)")
		}
		if hasAlgorithm && !slices.Contains(algorithms, l.Algorithm) {
			return nil, b.errorf(fields["algorithm"].line, "unknown algorithm '%s' (one of %s)", l.Algorithm, strings.Join(algorithms, ", "))
		}
		l.Unit = rlsv3.RateLimitResponse_RateLimit_Unit(v)
		l.Period = unitPeriod(l.Unit)
		l.RequestsPerUnit = rpu
	}

	items, err := b.list("replaces", fields["replaces"])
	if err != nil {
		return nil, err
	}
	for _, item := range items {
		rf, err := b.mapping(item, "a replaces entry", replacesKeys)
		if err != nil {
			return nil, err
		}
		name, err := b.str("name", rf["name"])
		if err != nil {
			return nil, err
		}
		if name == "" {
			return nil, b.errorf(item.Line, "should not have an empty replaces entry")
		}
		if name == l.Name {
			return nil, b.errorf(item.Line, "replaces should not contain name of same descriptor")
		}
		l.Replaces = append(l.Replaces, name)
		b.replaces = append(b.replaces, replaceRef{name: name, line: item.Line})
	}
	if l.Name != "" {
		b.names[l.Name] = true
	}
	return l, nil
}

// unitPeriod is the length of unit as envoy ratelimit divides time
// (utils.UnitToDivider): a month is 30 days, a year 365; 0 for UNKNOWN or
// a number that is no unit.
func unitPeriod(unit rlsv3.RateLimitResponse_RateLimit_Unit) time.Duration {
	const day = 24 * time.Hour
	switch unit {
	case rlsv3.RateLimitResponse_RateLimit_SECOND:
		return time.Second
	case rlsv3.RateLimitResponse_RateLimit_MINUTE:
		return time.Minute
	case rlsv3.RateLimitResponse_RateLimit_HOUR:
		return time.Hour
	case rlsv3.RateLimitResponse_RateLimit_DAY:
		return day
	case rlsv3.RateLimitResponse_RateLimit_WEEK:
		return 7 * day
	case rlsv3.RateLimitResponse_RateLimit_MONTH:
		return 30 * day
	case rlsv3.RateLimitResponse_RateLimit_YEAR:
		return 365 * day
	}
	return 0
}
