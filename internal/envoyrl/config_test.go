package envoyrl_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	commonrl "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/coordd/coordd/internal/envoyrl"
)

// basic follows envoy ratelimit's test/config/basic_config.yaml, with the
// shadow_mode, quota_mode, replaces and algorithm cases added.
const basic = `# the cases of envoy ratelimit's basic_config.yaml
domain: test-domain
descriptors:
  - key: key1
    value: value1
    descriptors:
      - key: subkey1
        rate_limit:
          unit: second
          requests_per_unit: 5
      - key: subkey1
        value: subvalue1
        shadow_mode: true
        rate_limit:
          unit: second
          requests_per_unit: 10
  - key: key2
    rate_limit:
      unit: minute
      requests_per_unit: 20
  - key: key2
    value: value2
    rate_limit:
      unit: Minute
      requests_per_unit: 30
  - key: key2
    value: value3
  - key: key3
    rate_limit:
      unit: HOUR
      requests_per_unit: 1
  - key: key4
    rate_limit:
      name: key4_rate_limit
      unit: day
      requests_per_unit: 1
  - key: key5
    value: value5
    rate_limit:
      unit: day
      requests_per_unit: 15
    descriptors:
      - key: subkey5
        value: subvalue5
        rate_limit:
          unit: day
          requests_per_unit: 25
  - key: key6
    rate_limit:
      unlimited: true
      replaces:
        - name: key4_rate_limit
  - key: key7
    detailed_metric: true
    rate_limit:
      unit: minute
      requests_per_unit: 70
  - key: key8
    quota_mode: yes
    rate_limit:
      unit: week
      requests_per_unit: 0
      algorithm: token_bucket
  - key: key9
    rate_limit: {unit: month, requests_per_unit: 0x10}
  - key: key10
    rate_limit: {unit: year, requests_per_unit: 1_000}
`

// wildcard follows envoy ratelimit's test/config/wildcard.yaml.
const wildcard = `domain: test-domain
descriptors:
  - key: wild
    value: foo*
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: noWild
    value: foo
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: noVal
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: midWild
    value: bar*b
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: nestedWild
    value: val1
    descriptors:
      - key: wild
        value: goo*
        rate_limit: {unit: minute, requests_per_unit: 20}
  - key: order
    value: ab*
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: order
    value: a*
    rate_limit: {unit: minute, requests_per_unit: 2}
`

// shareThreshold follows envoy ratelimit's test/config/share_threshold.yaml.
const shareThreshold = `domain: test-domain
descriptors:
  - key: files
    value: files/*
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: nested
    value: parent
    descriptors:
      - key: files
        value: nested/*
        share_threshold: true
        rate_limit: {unit: minute, requests_per_unit: 200}
  - key: files
    value: top/*
    share_threshold: true
    descriptors:
      - key: files
        value: nested/*
        share_threshold: true
        rate_limit: {unit: minute, requests_per_unit: 300}
  - key: route
    value: api/*
    share_threshold: true
    value_to_metric: true
    descriptors:
      - key: method
        rate_limit: {unit: minute, requests_per_unit: 60}
  - key: service
    value: svc/*
    share_threshold: true
    descriptors:
      - key: endpoint
        detailed_metric: true
        rate_limit: {unit: minute, requests_per_unit: 80}
  - key: path
    value: path/*
    share_threshold: true
    descriptors:
      - key: file
        value: file/*
        share_threshold: false
        descriptors:
          - key: type
            rate_limit: {unit: minute, requests_per_unit: 120}
  - key: file
    value: test1
    rate_limit: {unit: minute, requests_per_unit: 50}
  - key: file
    value: test*
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 100}
`

// metrics holds envoy ratelimit's detailed_metric and value_to_metric cases
// (config_test.go's TestDetailedMetric and TestValueToMetric_*).
const metrics = `domain: d
descriptors:
  - key: route
    value_to_metric: true
    descriptors:
      - key: http_method
        value_to_metric: true
        descriptors:
          - key: subject_id
            rate_limit: {unit: minute, requests_per_unit: 60}
          - key: detailed
            detailed_metric: true
            rate_limit: {unit: minute, requests_per_unit: 60}
      - key: http_method
        value: GET
        value_to_metric: true
        descriptors:
          - key: subject_id
            rate_limit: {unit: minute, requests_per_unit: 30}
  - key: k1
    descriptors:
      - key: k2
        value_to_metric: true
        descriptors:
          - key: k3
            rate_limit: {unit: second, requests_per_unit: 1}
  - key: user
    value_to_metric: true
    descriptors:
      - key: action
        value: read*
        value_to_metric: true
        descriptors:
          - key: resource
            rate_limit: {unit: minute, requests_per_unit: 100}
  - key: wild
    value: foo*
    descriptors:
      - key: other
        value_to_metric: true
        descriptors:
          - key: limit
            rate_limit: {unit: minute, requests_per_unit: 20}
  - key: key-1
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 100}
    descriptors:
      - key: key-2
        detailed_metric: true
        rate_limit: {unit: minute, requests_per_unit: 5}
`

func parse(t *testing.T, files map[string]string) *envoyrl.Config {
	t.Helper()
	in := map[string][]byte{}
	for name, s := range files {
		in[name] = []byte(s)
	}
	c, err := envoyrl.Parse(in)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return c
}

// desc builds a descriptor from key, value pairs.
func desc(kv ...string) *commonrl.RateLimitDescriptor {
	d := &commonrl.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &commonrl.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func withOverride(d *commonrl.RateLimitDescriptor, rpu uint32, unit typev3.RateLimitUnit) *commonrl.RateLimitDescriptor {
	d.Limit = &commonrl.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: rpu, Unit: unit}
	return d
}

func TestParseErrors(t *testing.T) {
	good := "domain: other\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n"
	for _, tc := range []struct {
		name  string
		files map[string]string
		file  string
		line  int
		msg   string
	}{
		{"bad yaml", map[string]string{"a.yaml": "'''\n"}, "a.yaml", 0, "yaml: line"},
		{"empty file", map[string]string{"a.yaml": ""}, "a.yaml", 1, "empty domain"},
		{"empty domain", map[string]string{"a.yaml": "descriptors:\n"}, "a.yaml", 1, "empty domain"},
		{"empty document", map[string]string{"a.yaml": "---\n"}, "a.yaml", 1, "empty domain"},
		{"complex key", map[string]string{"a.yaml": "? [a]\n: b\n"}, "a.yaml", 1, "key is not of type string: a list or mapping"},
		{"null domain", map[string]string{"a.yaml": "\ndomain: ~\n"}, "a.yaml", 2, "empty domain"},
		{"top level list", map[string]string{"a.yaml": "- domain: x\n"}, "a.yaml", 1, "the top level must be a mapping"},
		{"duplicate domain", map[string]string{"a.yaml": good, "b.yaml": "# b\ndomain: other\n"}, "b.yaml", 2, "duplicate domain 'other' in config file (first in a.yaml:1)"},
		{"second document", map[string]string{"a.yaml": good + "---\ndomain: x\n"}, "a.yaml", 5, "second YAML document"},
		{"misspelled key", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    ratelimit:\n      unit: day\n"}, "a.yaml", 4, "config error, unknown key 'ratelimit'"},
		{"misspelled key in rate_limit", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: day\n      requestsperunit: 5\n"}, "a.yaml", 6, "unknown key 'requestsperunit'"},
		{"misplaced key", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: day\n      requests_per_unit: 5\n      shadow_mode: true\n"}, "a.yaml", 7, "key 'shadow_mode' does not belong in a rate_limit"},
		{"misplaced key at top", map[string]string{"a.yaml": "domain: d\nkey: k\n"}, "a.yaml", 2, "key 'key' does not belong in the top level"},
		{"non string key", map[string]string{"a.yaml": "0.25: test-domain\n"}, "a.yaml", 1, "config error, key is not of type string: 0.25"},
		{"duplicate yaml key", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    key: j\n"}, "a.yaml", 4, "duplicate key 'key' in a descriptor (first at line 3)"},
		{"duplicate yaml key at top", map[string]string{"a.yaml": "domain: d\ndomain: e\n"}, "a.yaml", 2, "duplicate key 'domain'"},
		{"non map list", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - a\n  - b\n"}, "a.yaml", 3, "list of type other than map: a"},
		{"descriptors not a list", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  key: k\n"}, "a.yaml", 3, "descriptors must be a list"},
		{"empty key", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - value: v\n"}, "a.yaml", 3, "descriptor has empty key"},
		{"duplicate descriptor", map[string]string{"a.yaml": "domain: test-domain\ndescriptors:\n  - key: key1\n    value: value1\n\n  - key: key1\n    value: value1\n"}, "a.yaml", 6, "duplicate descriptor composite key 'test-domain.key1_value1' (first at line 3)"},
		{"duplicate descriptor by underscore", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: a\n    value: b\n  - key: a_b\n"}, "a.yaml", 5, "duplicate descriptor composite key 'd.a_b'"},
		{"duplicate nested descriptor", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: a\n    descriptors:\n      - key: b\n      - key: b\n"}, "a.yaml", 6, "'d.a.b'"},
		{"bad unit", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: foo\n      requests_per_unit: 5\n"}, "a.yaml", 5, "invalid rate limit unit 'foo'"},
		{"unit unknown", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: unknown, requests_per_unit: 5}\n"}, "a.yaml", 4, "invalid rate limit unit 'unknown'"},
		{"no unit", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      requests_per_unit: 5\n"}, "a.yaml", 5, "invalid rate limit unit ''"},
		{"no requests_per_unit", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n"}, "a.yaml", 5, "no requests_per_unit"},
		{"unlimited with unit", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: foo\n    rate_limit:\n      unlimited: true\n      unit: day\n"}, "a.yaml", 6, "should not specify rate limit unit when unlimited"},
		{"unlimited with bad unit", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: foo\n    rate_limit:\n      unlimited: true\n      unit: foo\n"}, "a.yaml", 6, "should not specify rate limit unit when unlimited"},
		{"unlimited with requests_per_unit", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: foo\n    rate_limit:\n      unlimited: true\n      requests_per_unit: 25\n"}, "a.yaml", 6, "should not specify requests_per_unit when unlimited"},
		{"unlimited with algorithm", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: foo\n    rate_limit:\n      unlimited: true\n      algorithm: token_bucket\n"}, "a.yaml", 6, "should not specify algorithm when unlimited"},
		{"unknown algorithm", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: foo\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      algorithm: gcra\n"}, "a.yaml", 7, "unknown algorithm 'gcra'"},
		{"empty algorithm", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: foo\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      algorithm: ''\n"}, "a.yaml", 7, "unknown algorithm ''"},
		{"replaces self", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      name: self\n      replaces:\n        - name: self\n      unit: second\n      requests_per_unit: 5\n"}, "a.yaml", 7, "replaces should not contain name of same descriptor"},
		{"replaces empty", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      name: self\n      replaces:\n        - name:\n      unit: second\n      requests_per_unit: 5\n"}, "a.yaml", 7, "should not have an empty replaces entry"},
		{"replaces undefined", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      replaces:\n        - name: nowhere\n      unit: second\n      requests_per_unit: 5\n"}, "a.yaml", 6, "replaces names 'nowhere', which no rate_limit of domain 'd' defines"},
		{"replaces defined in another domain", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      replaces:\n        - name: there\n      unit: second\n      requests_per_unit: 5\n",
			"b.yaml": "domain: e\ndescriptors:\n  - key: k\n    rate_limit: {name: there, unit: second, requests_per_unit: 1}\n"}, "a.yaml", 6, "replaces names 'there'"},
		{"replaces not a map", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      replaces: [x]\n      unit: second\n      requests_per_unit: 5\n"}, "a.yaml", 5, "list of type other than map: x"},
		{"share_threshold without wildcard", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    value: v\n    share_threshold: true\n"}, "a.yaml", 5, "share_threshold can only be used with wildcard values (ending with '*'), but found key 'k_v'"},
		{"float value", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    value: 0.5\n"}, "a.yaml", 4, "value 0.5 is read as a number envoy ratelimit refuses"},
		{"big integer value", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    value: 18446744073709551615\n"}, "a.yaml", 4, "value 18446744073709551615"},
		{"octal-looking float", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    value: 08\n"}, "a.yaml", 4, "value 08"},
		{"negative requests_per_unit", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: -1}\n"}, "a.yaml", 4, "requests_per_unit must be an integer"},
		{"too large requests_per_unit", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 4294967296}\n"}, "a.yaml", 4, "requests_per_unit must be an integer"},
		{"quoted requests_per_unit", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: \"5\"}\n"}, "a.yaml", 4, "requests_per_unit must be an integer"},
		{"bad bool", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    shadow_mode: maybe\n"}, "a.yaml", 4, "shadow_mode must be true or false"},
		{"quoted bool", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    shadow_mode: 'true'\n"}, "a.yaml", 4, "shadow_mode must be true or false"},
		{"list for a string", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: [a]\n"}, "a.yaml", 3, "key must be a string"},
		{"rate_limit not a mapping", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit: 5\n"}, "a.yaml", 4, "a rate_limit must be a mapping"},
		{"merge key", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      <<: {unit: second}\n      requests_per_unit: 1\n"}, "a.yaml", 5, "merge keys"},
		{"explicit tag", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: !!str k\n"}, "a.yaml", 3, "explicit YAML tag"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := map[string][]byte{}
			for name, s := range tc.files {
				in[name] = []byte(s)
			}
			_, err := envoyrl.Parse(in)
			var e *envoyrl.Error
			if !errors.As(err, &e) {
				t.Fatalf("Parse: %v, want an *envoyrl.Error", err)
			}
			if e.File != tc.file || e.Line != tc.line || !strings.Contains(e.Msg, tc.msg) {
				t.Fatalf("Parse: %q (file %q line %d), want file %q line %d, message containing %q", err, e.File, e.Line, tc.file, tc.line, tc.msg)
			}
			if tc.line > 0 && !strings.HasPrefix(err.Error(), tc.file+":") {
				t.Fatalf("Error() = %q, want it to start with the file and line", err)
			}
		})
	}
}

func TestParseGood(t *testing.T) {
	for name, s := range map[string]string{
		"envoy's duplicate_domain.yaml alone": "domain: test-domain\ndescriptors:\n",
		"key-only wildcard":                   "domain: d\ndescriptors:\n  - key: foo*\n    share_threshold: true\n",
		"null rate_limit":                     "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n",
		"flags without rate_limit":            "domain: d\ndescriptors:\n  - key: k\n    shadow_mode: true\n    detailed_metric: on\n",
		"alias":                               "domain: d\ndescriptors:\n  - key: a\n    rate_limit: &r {unit: second, requests_per_unit: 1}\n  - key: b\n    rate_limit: *r\n",
		"quoted keys":                         "\"domain\": d\n'descriptors': []\n",
		"algorithms": "domain: d\ndescriptors:\n" +
			"  - {key: a, rate_limit: {unit: second, requests_per_unit: 1, algorithm: fixed_window}}\n" +
			"  - {key: b, rate_limit: {unit: second, requests_per_unit: 1, algorithm: sliding_window}}\n" +
			"  - {key: c, rate_limit: {unit: second, requests_per_unit: 1, algorithm: sliding_log}}\n" +
			"  - {key: d, rate_limit: {unit: second, requests_per_unit: 1, algorithm: token_bucket}}\n" +
			"  - {key: e, rate_limit: {unit: second, requests_per_unit: 1, algorithm: leaky_bucket}}\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := envoyrl.Parse(map[string][]byte{"a.yaml": []byte(s)}); err != nil {
				t.Fatalf("Parse: %v", err)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", "domain: a\n")
	write("sub/b.yml", "domain: b\n")
	write("notes.txt", "not yaml")
	write(".hidden.yaml", "domain: a\n")        // would be a duplicate
	write("..2024_01_01/c.yaml", "domain: c\n") // a ConfigMap's real directory
	if err := os.Symlink("..2024_01_01/c.yaml", filepath.Join(dir, "c.yaml")); err != nil {
		t.Fatal(err)
	}
	// dir itself may be a symbolic link, as envoy's runtime "current" is
	link := filepath.Join(t.TempDir(), "current")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}

	c, err := envoyrl.Load(link)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got, want := c.Domains(), []string{"a", "b", "c"}; !slices.Equal(got, want) {
		t.Fatalf("Domains() = %q, want %q", got, want)
	}

	write("sub/bad.yaml", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n")
	_, err = envoyrl.Load(dir)
	if want := filepath.Join(dir, "sub", "bad.yaml") + ":4: invalid rate limit unit 'fortnight'"; err == nil || err.Error() != want {
		t.Fatalf("Load: %v, want %s", err, want)
	}

	if _, err := envoyrl.Load(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("Load of a missing directory: no error")
	}
}

func TestLimit(t *testing.T) {
	c := parse(t, map[string]string{"basic.yaml": basic, "wildcard.yaml": strings.Replace(wildcard, "test-domain", "wild-domain", 1)})

	for _, tc := range []struct {
		name   string
		domain string
		d      *commonrl.RateLimitDescriptor
		want   *envoyrl.Limit // nil: no limit
	}{
		{"unknown domain", "foo_domain", desc("key1", "value1"), nil},
		{"unknown domain with override", "foo_domain", withOverride(desc("key1", "value1"), 10, typev3.RateLimitUnit_DAY), nil},
		{"no entries", "test-domain", desc(), nil},
		{"nil descriptor", "test-domain", nil, nil},
		{"unknown value", "test-domain", desc("key1", "something"), nil},
		{"level without rate_limit", "test-domain", desc("key1", "value1"), nil},
		{"more entries than levels", "test-domain", desc("key2", "value2", "subkey", "subvalue"), nil},
		{"deeper value unknown", "test-domain", desc("key5", "value5", "subkey5", "subvalue"), nil},
		{"nested, key without value matches any value", "test-domain", desc("key1", "value1", "subkey1", "something"), &envoyrl.Limit{
			FullKey: "test-domain.key1_value1.subkey1", StatKey: "test-domain.key1.subkey1",
			Unit: rlsv3.RateLimitResponse_RateLimit_SECOND, Period: time.Second, RequestsPerUnit: 5,
		}},
		{"nested, value wins over key alone; shadow_mode", "test-domain", desc("key1", "value1", "subkey1", "subvalue1"), &envoyrl.Limit{
			FullKey: "test-domain.key1_value1.subkey1_subvalue1", StatKey: "test-domain.key1.subkey1",
			Unit: rlsv3.RateLimitResponse_RateLimit_SECOND, Period: time.Second, RequestsPerUnit: 10, ShadowMode: true,
		}},
		{"key alone", "test-domain", desc("key2", "something"), &envoyrl.Limit{
			FullKey: "test-domain.key2", StatKey: "test-domain.key2",
			Unit: rlsv3.RateLimitResponse_RateLimit_MINUTE, Period: time.Minute, RequestsPerUnit: 20,
		}},
		{"empty value takes the key alone", "test-domain", desc("key2", ""), &envoyrl.Limit{
			FullKey: "test-domain.key2", StatKey: "test-domain.key2",
			Unit: rlsv3.RateLimitResponse_RateLimit_MINUTE, Period: time.Minute, RequestsPerUnit: 20,
		}},
		{"value, unit in any case", "test-domain", desc("key2", "value2"), &envoyrl.Limit{
			FullKey: "test-domain.key2_value2", StatKey: "test-domain.key2",
			Unit: rlsv3.RateLimitResponse_RateLimit_MINUTE, Period: time.Minute, RequestsPerUnit: 30,
		}},
		{"value without rate_limit allows", "test-domain", desc("key2", "value3"), nil},
		{"hour", "test-domain", desc("key3", "foo"), &envoyrl.Limit{
			FullKey: "test-domain.key3", StatKey: "test-domain.key3",
			Unit: rlsv3.RateLimitResponse_RateLimit_HOUR, Period: time.Hour, RequestsPerUnit: 1,
		}},
		{"name", "test-domain", desc("key4", "foo"), &envoyrl.Limit{
			FullKey: "test-domain.key4", StatKey: "test-domain.key4", Name: "key4_rate_limit",
			Unit: rlsv3.RateLimitResponse_RateLimit_DAY, Period: 24 * time.Hour, RequestsPerUnit: 1,
		}},
		{"both levels limited, short request", "test-domain", desc("key5", "value5"), &envoyrl.Limit{
			FullKey: "test-domain.key5_value5", StatKey: "test-domain.key5",
			Unit: rlsv3.RateLimitResponse_RateLimit_DAY, Period: 24 * time.Hour, RequestsPerUnit: 15,
		}},
		{"both levels limited, long request", "test-domain", desc("key5", "value5", "subkey5", "subvalue5"), &envoyrl.Limit{
			FullKey: "test-domain.key5_value5.subkey5_subvalue5", StatKey: "test-domain.key5.subkey5",
			Unit: rlsv3.RateLimitResponse_RateLimit_DAY, Period: 24 * time.Hour, RequestsPerUnit: 25,
		}},
		{"unlimited, replaces", "test-domain", desc("key6", "foo"), &envoyrl.Limit{
			FullKey: "test-domain.key6", StatKey: "test-domain.key6", Unlimited: true, Replaces: []string{"key4_rate_limit"},
		}},
		{"detailed_metric", "test-domain", desc("key7", "unspecified_value"), &envoyrl.Limit{
			FullKey: "test-domain.key7_unspecified_value", StatKey: "test-domain.key7", DetailedMetric: true,
			Unit: rlsv3.RateLimitResponse_RateLimit_MINUTE, Period: time.Minute, RequestsPerUnit: 70,
		}},
		{"quota_mode, week, algorithm, 0 allowed", "test-domain", desc("key8", "x"), &envoyrl.Limit{
			FullKey: "test-domain.key8", StatKey: "test-domain.key8", QuotaMode: true, Algorithm: "token_bucket",
			Unit: rlsv3.RateLimitResponse_RateLimit_WEEK, Period: 7 * 24 * time.Hour, RequestsPerUnit: 0,
		}},
		{"month is 30 days, hex", "test-domain", desc("key9", "x"), &envoyrl.Limit{
			FullKey: "test-domain.key9", StatKey: "test-domain.key9",
			Unit: rlsv3.RateLimitResponse_RateLimit_MONTH, Period: 30 * 24 * time.Hour, RequestsPerUnit: 16,
		}},
		{"year is 365 days, underscores", "test-domain", desc("key10", "x"), &envoyrl.Limit{
			FullKey: "test-domain.key10", StatKey: "test-domain.key10",
			Unit: rlsv3.RateLimitResponse_RateLimit_YEAR, Period: 365 * 24 * time.Hour, RequestsPerUnit: 1000,
		}},
		{"override", "test-domain", withOverride(desc("key1", "value1", "subkey1", "something"), 10, typev3.RateLimitUnit_DAY), &envoyrl.Limit{
			FullKey: "test-domain.key1_value1.subkey1_something", StatKey: "test-domain.key1.subkey1", Override: true,
			Unit: rlsv3.RateLimitResponse_RateLimit_DAY, Period: 24 * time.Hour, RequestsPerUnit: 10,
		}},
		{"override drops shadow_mode", "test-domain", withOverride(desc("key1", "value1", "subkey1", "subvalue1"), 42, typev3.RateLimitUnit_HOUR), &envoyrl.Limit{
			FullKey: "test-domain.key1_value1.subkey1_subvalue1", StatKey: "test-domain.key1.subkey1", Override: true,
			Unit: rlsv3.RateLimitResponse_RateLimit_HOUR, Period: time.Hour, RequestsPerUnit: 42,
		}},
		{"override of an unconfigured descriptor, empty value", "test-domain", withOverride(desc("nope", "x", "also", ""), 1, typev3.RateLimitUnit_SECOND), &envoyrl.Limit{
			FullKey: "test-domain.nope_x.also", StatKey: "test-domain.(override)", Override: true,
			Unit: rlsv3.RateLimitResponse_RateLimit_SECOND, Period: time.Second, RequestsPerUnit: 1,
		}},
		{"override with unknown unit", "test-domain", withOverride(desc("key3", "x"), 1, typev3.RateLimitUnit_UNKNOWN), &envoyrl.Limit{
			FullKey: "test-domain.key3_x", StatKey: "test-domain.key3", Override: true, RequestsPerUnit: 1,
		}},
		// wildcard.yaml
		{"key alone matches any value", "wild-domain", desc("noVal", "foo1"), &envoyrl.Limit{
			FullKey: "wild-domain.noVal", StatKey: "wild-domain.noVal",
			Unit: rlsv3.RateLimitResponse_RateLimit_MINUTE, Period: time.Minute, RequestsPerUnit: 20,
		}},
		{"wildcard", "wild-domain", desc("wild", "foo1"), &envoyrl.Limit{
			FullKey: "wild-domain.wild_foo*", StatKey: "wild-domain.wild",
			Unit: rlsv3.RateLimitResponse_RateLimit_MINUTE, Period: time.Minute, RequestsPerUnit: 20,
		}},
		{"wildcard matches the empty rest", "wild-domain", desc("wild", "foo"), &envoyrl.Limit{
			FullKey: "wild-domain.wild_foo*", StatKey: "wild-domain.wild",
			Unit: rlsv3.RateLimitResponse_RateLimit_MINUTE, Period: time.Minute, RequestsPerUnit: 20,
		}},
		{"nested wildcard", "wild-domain", desc("nestedWild", "val1", "wild", "goo2"), &envoyrl.Limit{
			FullKey: "wild-domain.nestedWild_val1.wild_goo*", StatKey: "wild-domain.nestedWild.wild",
			Unit: rlsv3.RateLimitResponse_RateLimit_MINUTE, Period: time.Minute, RequestsPerUnit: 20,
		}},
		{"wildcard does not match another prefix", "wild-domain", desc("wild", "bar"), nil},
		{"a value without * matches only itself", "wild-domain", desc("noWild", "foo1"), nil},
		{"* inside a value is no wildcard", "wild-domain", desc("midWild", "barab"), nil},
		{"first wildcard in file order wins", "wild-domain", desc("order", "abc"), &envoyrl.Limit{
			FullKey: "wild-domain.order_ab*", StatKey: "wild-domain.order",
			Unit: rlsv3.RateLimitResponse_RateLimit_MINUTE, Period: time.Minute, RequestsPerUnit: 1,
		}},
		{"later wildcard", "wild-domain", desc("order", "ax"), &envoyrl.Limit{
			FullKey: "wild-domain.order_a*", StatKey: "wild-domain.order",
			Unit: rlsv3.RateLimitResponse_RateLimit_MINUTE, Period: time.Minute, RequestsPerUnit: 2,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := c.Limit(tc.domain, tc.d)
			if !equalLimit(got, tc.want) {
				t.Fatalf("Limit = %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func equalLimit(a, b *envoyrl.Limit) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.FullKey == b.FullKey && a.StatKey == b.StatKey && a.Unit == b.Unit && a.Period == b.Period &&
		a.RequestsPerUnit == b.RequestsPerUnit && a.Unlimited == b.Unlimited && a.ShadowMode == b.ShadowMode &&
		a.QuotaMode == b.QuotaMode && a.Name == b.Name && slices.Equal(a.Replaces, b.Replaces) &&
		a.DetailedMetric == b.DetailedMetric && a.Algorithm == b.Algorithm &&
		slices.Equal(a.ShareThresholdKeyPattern, b.ShareThresholdKeyPattern) && a.Override == b.Override
}

// TestFullKey checks envoy ratelimit's FullKey (its stats key) where
// detailed_metric, value_to_metric and share_threshold change it, with the
// keys its config_test.go expects.
func TestFullKey(t *testing.T) {
	c := parse(t, map[string]string{"metrics.yaml": metrics, "share.yaml": shareThreshold})
	for _, tc := range []struct {
		domain, want string
		d            *commonrl.RateLimitDescriptor
	}{
		{"d", "d.route_draw.http_method_GET.subject_id", desc("route", "draw", "http_method", "GET", "subject_id", "123")},
		{"d", "d.route_draw.http_method_PUT.subject_id", desc("route", "draw", "http_method", "PUT", "subject_id", "123")},
		{"d", "d.route.http_method_PUT.subject_id", desc("route", "", "http_method", "PUT", "subject_id", "123")},
		{"d", "d.route.http_method.subject_id", desc("route", "", "http_method", "", "subject_id", "123")},
		{"d", "d.route_draw.http_method_PUT.detailed_123", desc("route", "draw", "http_method", "PUT", "detailed", "123")},
		{"d", "d.route_draw.http_method_PUT.detailed_", desc("route", "draw", "http_method", "PUT", "detailed", "")},
		{"d", "d.k1.k2_Y.k3", desc("k1", "X", "k2", "Y", "k3", "Z")},
		{"d", "d.user_alice.action_readfile.resource", desc("user", "alice", "action", "readfile", "resource", "documents")},
		{"d", "d.wild_foo*.other_bar.limit", desc("wild", "foo1", "other", "bar", "limit", "X")},
		{"d", "d.key-1_value-1", desc("key-1", "value-1")},
		{"d", "d.key-1_value-1.key-2_value-2", desc("key-1", "value-1", "key-2", "value-2")},
		{"test-domain", "test-domain.files_files/*", desc("files", "files/a.pdf")},
		{"test-domain", "test-domain.route_api/*.method", desc("route", "api/v1", "method", "GET")},
		{"test-domain", "test-domain.service_svc/*.endpoint_get", desc("service", "svc/user", "endpoint", "get")},
		{"test-domain", "test-domain.nested_parent.files_nested/*", desc("nested", "parent", "files", "nested/file1.txt")},
		{"test-domain", "test-domain.files_top/*.files_nested/*", desc("files", "top/file1.txt", "files", "nested/file1.txt")},
		{"test-domain", "test-domain.path_path/*.file_file/*.type", desc("path", "path/foo", "file", "file/doc1", "type", "pdf")},
		{"test-domain", "test-domain.file_test1", desc("file", "test1")},
		{"test-domain", "test-domain.file_test*", desc("file", "test2")},
	} {
		l := c.Limit(tc.domain, tc.d)
		if l == nil {
			t.Errorf("Limit(%s, %v) = nil, want FullKey %s", tc.domain, tc.d.GetEntries(), tc.want)
			continue
		}
		if l.FullKey != tc.want {
			t.Errorf("Limit(%s, %v).FullKey = %s, want %s", tc.domain, tc.d.GetEntries(), l.FullKey, tc.want)
		}
	}
}

func TestShareThreshold(t *testing.T) {
	c := parse(t, map[string]string{"share.yaml": shareThreshold})
	for _, tc := range []struct {
		d       *commonrl.RateLimitDescriptor
		rpu     uint32
		pattern []string
	}{
		{desc("files", "files/a.pdf"), 100, []string{"files/*"}},
		{desc("nested", "parent", "files", "nested/file1.txt"), 200, []string{"", "nested/*"}},
		{desc("files", "top/x", "files", "nested/y"), 300, []string{"top/*", "nested/*"}},
		{desc("path", "path/foo", "file", "file/doc1", "type", "pdf"), 120, []string{"path/*", "", ""}},
		{desc("file", "test1"), 50, nil},
		{desc("file", "test23"), 100, []string{"test*"}},
	} {
		l := c.Limit("test-domain", tc.d)
		if l == nil || l.RequestsPerUnit != tc.rpu || !slices.Equal(l.ShareThresholdKeyPattern, tc.pattern) {
			t.Errorf("Limit(%v) = %+v, want %d requests and patterns %q", tc.d.GetEntries(), l, tc.rpu, tc.pattern)
		}
	}
}

// TestCounterKey checks when two descriptors share a counter, as envoy
// ratelimit's cache keys do.
func TestCounterKey(t *testing.T) {
	c := parse(t, map[string]string{"basic.yaml": basic, "share.yaml": strings.Replace(shareThreshold, "test-domain", "share", 1),
		"w.yaml": strings.Replace(wildcard, "test-domain", "wild", 1),
		"o.yaml": "domain: other\ndescriptors:\n  - key: key2\n    rate_limit: {unit: minute, requests_per_unit: 20}\n"})
	key := func(domain string, d *commonrl.RateLimitDescriptor) string {
		return envoyrl.CounterKey(domain, d, c.Limit(domain, d))
	}

	if got := envoyrl.CounterKey("test-domain", desc("key2", "x"), nil); got != "" {
		t.Errorf("CounterKey of nil limit = %q, want \"\"", got)
	}
	if got, want := key("test-domain", desc("key1", "value1", "subkey1", "x")), "test-domain_key1_value1_subkey1_x_"; got != want {
		t.Errorf("CounterKey = %q, want %q (envoy's cache key less prefix and time)", got, want)
	}
	if got, want := key("share", desc("route", "api/v1", "method", "GET")), "share_route_api/*_method_GET_"; got != want {
		t.Errorf("CounterKey = %q, want %q", got, want)
	}

	for _, tc := range []struct {
		name         string
		domainA      string
		a            *commonrl.RateLimitDescriptor
		domainB      string
		b            *commonrl.RateLimitDescriptor
		shareCounter bool
	}{
		{"key alone: each value its own counter", "test-domain", desc("key2", "a"), "test-domain", desc("key2", "b"), false},
		{"wildcard: each value its own counter", "wild", desc("wild", "foo1"), "wild", desc("wild", "foo2"), false},
		{"share_threshold: values share", "share", desc("files", "files/a"), "share", desc("files", "files/b"), true},
		{"share_threshold nested: values share", "share", desc("files", "top/a", "files", "nested/x"), "share", desc("files", "top/b", "files", "nested/y"), true},
		{"share_threshold then plain wildcard", "share", desc("path", "path/a", "file", "file/x", "type", "t"), "share", desc("path", "path/b", "file", "file/x", "type", "t"), true},
		{"share_threshold does not hide an unshared value", "share", desc("path", "path/a", "file", "file/x", "type", "t"), "share", desc("path", "path/a", "file", "file/y", "type", "t"), false},
		{"explicit value beside a shared wildcard", "share", desc("file", "test1"), "share", desc("file", "test2"), false},
		{"override counts with the configured limit", "test-domain", withOverride(desc("key2", "a"), 1, typev3.RateLimitUnit_SECOND), "test-domain", desc("key2", "a"), true},
		{"other domain", "test-domain", desc("key2", "a"), "other", desc("key2", "a"), false},
		{"underscores are ambiguous, as in envoy", "test-domain", desc("key2", "a_b"), "test-domain", withOverride(desc("key2_a", "b"), 1, typev3.RateLimitUnit_SECOND), true},
	} {
		a, b := key(tc.domainA, tc.a), key(tc.domainB, tc.b)
		if a == "" || b == "" {
			t.Errorf("%s: no limit (%q, %q)", tc.name, a, b)
			continue
		}
		if (a == b) != tc.shareCounter {
			t.Errorf("%s: keys %q and %q, want shared %v", tc.name, a, b, tc.shareCounter)
		}
	}
}

// TestConcurrentLimit reads one Config from many goroutines (run with -race).
func TestConcurrentLimit(t *testing.T) {
	c := parse(t, map[string]string{"share.yaml": shareThreshold})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				l := c.Limit("test-domain", desc("files", "top/a", "files", "nested/b"))
				if l == nil || envoyrl.CounterKey("test-domain", desc("files", "top/a", "files", "nested/b"), l) == "" {
					t.Error("no limit")
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestAliasExpansionBounded: 2 KB of nested aliases that would expand to
// 2^25 descriptors is refused, as envoy ratelimit's decoder refuses it,
// instead of stalling a load or a reload.
func TestAliasExpansionBounded(t *testing.T) {
	conf := "domain: bomb\ndescriptors:\n  - key: z\n    descriptors: &l0 [{key: a}, {key: b}]\n"
	for i := 1; i <= 25; i++ {
		conf += "  - key: z" + strconv.Itoa(i) + "\n    descriptors: &l" + strconv.Itoa(i) +
			" [{key: x, descriptors: *l" + strconv.Itoa(i-1) + "}, {key: y, descriptors: *l" + strconv.Itoa(i-1) + "}]\n"
	}
	_, err := envoyrl.Parse(map[string][]byte{"bomb.yaml": []byte(conf)})
	if err == nil || !strings.Contains(err.Error(), "YAML nodes") {
		t.Fatalf("Parse of nested aliases: %v, want a refusal naming the expansion", err)
	}
}
