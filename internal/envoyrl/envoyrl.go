// Package envoyrl reads envoyproxy/ratelimit's YAML configuration unchanged
// and answers, for a request descriptor, the limit that envoy ratelimit's
// own server would apply and the counter it would count it in.
//
// Ground truth is envoy ratelimit at the version coordd pins
// (src/config/config_impl.go, src/limiter/cache_key.go); this package is an
// independent implementation of the same decisions, down to its string keys
// (a descriptor of key k and value v is "k_v", so key "a_b" and key "a" with
// value "b" are one descriptor there, and here).
//
// # Files
//
// Each file holds one domain: domain, and descriptors, a list of
// descriptors with key, value, rate_limit (unit, requests_per_unit,
// unlimited, name, replaces), descriptors, shadow_mode, quota_mode,
// detailed_metric, value_to_metric and share_threshold. Scalars are read as
// envoy's YAML 1.1 decoder reads them (yes/on are booleans, 010 is octal,
// value: yes is the string "yes"). coordd adds algorithm beside unit in
// rate_limit: fixed_window, sliding_window, sliding_log, token_bucket or
// leaky_bucket; absent, the limit is envoy's fixed window.
//
// # What is refused
//
// Every problem is an *Error naming the file and the line. As envoy
// ratelimit does, a load refuses:
//   - YAML that does not parse, or whose top level is not a mapping;
//   - a missing or empty domain; a domain defined in two files (envoy's
//     default; MERGE_DOMAIN_CONFIG=true, which merges them, is not offered);
//   - an unknown key (envoy's validateYamlKeys), and a key that is not a string;
//   - a list item that is not a mapping (in descriptors and replaces);
//   - a value that is a float or an integer beyond int64 (validateYamlKeys
//     refuses those), and a value of the wrong type (a list for a key,
//     "5" quoted for requests_per_unit, a negative or too large
//     requests_per_unit, a bool that is not a YAML 1.1 bool);
//   - a descriptor without key; two descriptors with the same key and value
//     in one list;
//   - an invalid unit (envoy accepts any case: Minute, MINUTE);
//   - unit together with unlimited: true;
//   - an empty replaces name, or a limit replacing its own name;
//   - share_threshold on a descriptor whose value does not end in '*'.
//
// Stricter than envoy ratelimit, which would accept these and ignore part
// of them, coordd also refuses:
//   - a duplicate key in one YAML mapping (envoy keeps the last);
//   - a known key in the wrong place, such as shadow_mode inside rate_limit
//     or unit beside key (envoy drops it silently);
//   - requests_per_unit or algorithm with unlimited: true, and unit with
//     unlimited even when it is not a valid unit;
//   - a rate_limit without requests_per_unit (envoy reads 0: every request
//     is over the limit; write requests_per_unit: 0 if that is meant);
//   - a replaces name that no rate_limit of the same domain defines (envoy
//     replaces nothing);
//   - an algorithm that is not one of the five names;
//   - a second YAML document in a file (envoy reads the first only);
//   - YAML merge keys (<<) and explicit tags (!!str), which this reader
//     does not implement (aliases, *name, are read).
//
// shadow_mode, quota_mode and detailed_metric on a descriptor without
// rate_limit are accepted and, as in envoy ratelimit, have no effect.
//
// A Config is immutable: safe for concurrent use. A reload builds a new one.
package envoyrl

import (
	"maps"
	"slices"
	"strings"
	"time"

	commonrl "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// Limit is the limit that applies to one request descriptor. Config.Limit
// returns a new Limit on each call; its Replaces and
// ShareThresholdKeyPattern are shared and must not be modified.
type Limit struct {
	// FullKey is envoy ratelimit's FullKey, its stats key: the domain and
	// the descriptors as configured ("d.key1_value1.subkey1"), or with the
	// request's values for detailed_metric and value_to_metric, or the
	// request's descriptor for an override. For logs and tests: it may
	// carry any value a client sends.
	FullKey string
	// StatKey is the domain and the configured descriptor keys, never a
	// value ("d.key1.subkey1"): bounded by the configuration. An override
	// has the StatKey of the configured descriptor it walks to, or
	// "<domain>.(override)" when it walks to none.
	StatKey string
	// Unit is the unit of RequestsPerUnit; UNKNOWN for an unlimited limit,
	// or an override whose unit is UNKNOWN or no unit at all.
	Unit rlsv3.RateLimitResponse_RateLimit_Unit
	// Period is Unit's length as envoy ratelimit divides time: 1s, 1m, 1h,
	// 24h, a week of 7 days, a month of 30 days, a year of 365 days. It is
	// 0 exactly when Unit is UNKNOWN or no unit: for an unlimited limit,
	// which is not counted, and for an override of such a unit, on which
	// envoy ratelimit panics (the caller should refuse that request).
	Period          time.Duration
	RequestsPerUnit uint32
	// Unlimited: the descriptor is allowed without counting, and the
	// response says LimitRemaining MaxUint32. Its Replaces still apply.
	Unlimited bool
	// ShadowMode: an over-limit answer is counted and reported as OK.
	ShadowMode bool
	// QuotaMode: like ShadowMode for the answer, but envoy ratelimit lists
	// the descriptor among the quotaModeViolations of the response's
	// dynamic metadata.
	QuotaMode bool
	// Name is the rate_limit's name, which other limits' Replaces name.
	Name string
	// Replaces are the names of limits that this one, when it applies to
	// a descriptor of the same request, removes from the request.
	Replaces       []string
	DetailedMetric bool
	// Algorithm is coordd's extension: "" for envoy's fixed window, or one
	// of fixed_window, sliding_window, sliding_log, token_bucket,
	// leaky_bucket. Always "" for an override and an unlimited limit.
	Algorithm string
	// ShareThresholdKeyPattern is envoy ratelimit's field of that name:
	// nil, or one pattern per request entry, "" for an entry that matched
	// without share_threshold, else the wildcard value ("files/*") that
	// CounterKey puts in place of the entry's value, so that every value
	// the wildcard matches shares one counter.
	ShareThresholdKeyPattern []string
	// Override: the limit is the request descriptor's own limit, not the
	// configuration's (coordd's addition, for logs and metrics).
	Override bool
}

// Config is a loaded, validated configuration: every domain of every file.
type Config struct {
	domains map[string]*domain
	names   []string // sorted
}

// domain is one file's tree of descriptors.
type domain struct {
	name string
	file string
	line int // of its domain: key
	root node
}

// node is one configured descriptor, or a domain's root.
type node struct {
	line     int
	key      string // as configured
	mapKey   string // its key in the parent's children: key, or key_value
	fullKey  string // the domain and the mapKeys down to here, joined by "."
	statKey  string // the domain and the keys down to here, joined by "."
	limit    *Limit // nil: no rate_limit here
	children map[string]*node
	// wildcards are the children's mapKeys that end in '*', in file order:
	// the first whose prefix matches wins.
	wildcards      []string
	valueToMetric  bool
	shareThreshold bool
}

// Domains lists the configured domains, sorted.
func (c *Config) Domains() []string {
	return slices.Clone(c.names)
}

// HasDomain reports whether domain is configured.
func (c *Config) HasDomain(domain string) bool { return c.domains[domain] != nil }

// Limits returns every configured limit (not overrides), domain by domain
// in file order of their descriptors' lines; changing them changes nothing.
func (c *Config) Limits() []*Limit {
	var out []*Limit
	var walk func(n *node)
	walk = func(n *node) {
		if n.limit != nil {
			l := *n.limit
			out = append(out, &l)
		}
		kids := slices.Collect(maps.Values(n.children))
		slices.SortFunc(kids, func(a, b *node) int { return a.line - b.line })
		for _, k := range kids {
			walk(k)
		}
	}
	for _, name := range c.names {
		walk(&c.domains[name].root)
	}
	return out
}

// Limit returns the limit of descriptor d in domain, or nil if none
// applies, as envoy ratelimit's GetLimit does:
//   - an unknown domain has no limit, even with an override;
//   - a descriptor with its own limit (an override) gets it, whatever the
//     configuration says, as a plain limit: no shadow or quota mode, no
//     name, no replaces, Algorithm "". Its unit_multiplier is ignored, as
//     envoy ratelimit ignores it;
//   - otherwise each entry, in order, descends one level: first to the
//     descriptor of its key and value, else to the first wildcard value
//     (ending in '*') that the entry's "key_value" starts with, else to the
//     descriptor of its key alone, which matches any value;
//   - the limit is the one of the descriptor that the last entry reaches;
//     none when an entry finds no descriptor, when a level has no deeper
//     descriptors before the entries end, or when that descriptor has no
//     rate_limit.
func (c *Config) Limit(domain string, d *commonrl.RateLimitDescriptor) *Limit {
	dom := c.domains[domain]
	if dom == nil || d == nil {
		return nil
	}
	entries := d.GetEntries()
	m := dom.walk(entries)
	if o := d.GetLimit(); o != nil {
		unit := rlsv3.RateLimitResponse_RateLimit_Unit(o.GetUnit())
		l := &Limit{
			FullKey:         overrideKey(domain, entries),
			StatKey:         domain + ".(override)",
			Unit:            unit,
			Period:          unitPeriod(unit),
			RequestsPerUnit: o.GetRequestsPerUnit(),
			Override:        true,
		}
		if m.last != nil {
			l.StatKey = m.last.statKey
		}
		return l
	}
	if m.last == nil || m.last.limit == nil {
		return nil
	}
	l := *m.last.limit
	l.ShareThresholdKeyPattern = m.shared
	l.FullKey = m.fullKey(domain, entries, l.DetailedMetric)
	return &l
}

// match is where a request descriptor's entries lead in a domain.
type match struct {
	last *node // reached by the last entry; nil if the walk stopped before
	// metric holds, per entry, the value that envoy ratelimit writes after
	// the key in a FullKey without detailed_metric ("" for none).
	metric []string
	// shared holds, per entry, the share_threshold pattern; nil if none.
	shared []string
}

// walk descends the domain's tree one entry at a time.
func (dom *domain) walk(entries []*commonrl.RateLimitDescriptor_Entry) match {
	var m match
	level := &dom.root
	for i, e := range entries {
		key, value := e.GetKey(), e.GetValue()
		keyValue := key + "_" + value
		next, wildcard := level.children[keyValue], ""
		if next == nil {
			for _, w := range level.wildcards {
				if strings.HasPrefix(keyValue, strings.TrimSuffix(w, "*")) {
					next, wildcard = level.children[w], w
					break
				}
			}
		}
		byValue := next != nil
		if next == nil {
			next = level.children[key]
		}
		if next == nil {
			return match{}
		}

		metric := ""
		switch {
		case wildcard != "" && next.shareThreshold:
			pattern := strings.TrimPrefix(wildcard, key+"_")
			if m.shared == nil {
				m.shared = make([]string, len(entries))
			}
			m.shared[i] = pattern
			metric = pattern
		case wildcard != "" && next.valueToMetric:
			metric = value
		case wildcard != "":
			metric = strings.TrimPrefix(wildcard, key+"_")
		case byValue || next.valueToMetric:
			metric = value
		}
		m.metric = append(m.metric, metric)

		if i == len(entries)-1 {
			m.last = next
			return m
		}
		if len(next.children) == 0 {
			return match{}
		}
		level = next
	}
	return match{}
}

// fullKey is envoy ratelimit's FullKey of a configured limit that entries
// reached.
func (m match) fullKey(domain string, entries []*commonrl.RateLimitDescriptor_Entry, detailed bool) string {
	var b strings.Builder
	b.WriteString(domain)
	for i, e := range entries {
		b.WriteByte('.')
		b.WriteString(e.GetKey())
		var value string
		switch {
		case detailed && m.shared != nil && m.shared[i] != "":
			value = m.shared[i]
		case detailed && m.shared != nil:
			value = e.GetValue()
		case detailed:
			// envoy writes the separator even for an empty value here
			b.WriteByte('_')
			b.WriteString(e.GetValue())
			continue
		default:
			value = m.metric[i]
		}
		if value != "" {
			b.WriteByte('_')
			b.WriteString(value)
		}
	}
	return b.String()
}

// overrideKey is envoy ratelimit's FullKey of an override (its descriptorKey).
func overrideKey(domain string, entries []*commonrl.RateLimitDescriptor_Entry) string {
	parts := make([]string, len(entries))
	for i, e := range entries {
		parts[i] = e.GetKey()
		if e.GetValue() != "" {
			parts[i] += "_" + e.GetValue()
		}
	}
	return domain + "." + strings.Join(parts, ".")
}

// CounterKey is the identity of d's counter under l, "" for a nil l. Two
// keys are equal exactly when envoy ratelimit's cache keys
// (src/limiter/cache_key.go) are, less its prefix and its time part: the
// domain, then each entry's key and value, "_" after each, a
// share_threshold pattern in place of the value it matched. Like envoy's,
// the key does not separate unambiguously: domain "a_b" with key "c" and
// domain "a" with key "b_c" share a counter, in both.
//
// The key holds neither the unit, the period nor the algorithm (envoy's
// time part holds only the start of the window): a caller that counts
// limits of different periods or algorithms apart must add them.
func CounterKey(domain string, d *commonrl.RateLimitDescriptor, l *Limit) string {
	if l == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString(domain)
	b.WriteByte('_')
	for i, e := range d.GetEntries() {
		b.WriteString(e.GetKey())
		b.WriteByte('_')
		if i < len(l.ShareThresholdKeyPattern) && l.ShareThresholdKeyPattern[i] != "" {
			b.WriteString(l.ShareThresholdKeyPattern[i])
		} else {
			b.WriteString(e.GetValue())
		}
		b.WriteByte('_')
	}
	return b.String()
}
