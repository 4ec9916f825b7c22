package gateway

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/grpc/codes"
)

// The gateway's calls are tested through the server's own harness, on
// every backend: internal/server's TestHTTP* tests.

// TestOpenAPIDocument checks the committed OpenAPI document against the
// HTTP rules: one POST path per rule and no other, none for a streaming
// RPC, the title set by api/http/openapi.yaml (whose options apply only if
// they name the first .proto file), and the API key in the Authorization
// header.
func TestOpenAPIDocument(t *testing.T) {
	rules, err := os.ReadFile("../../api/http/gateway.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, m := range regexp.MustCompile(`(?m)^\s+post: (\S+)$`).FindAllStringSubmatch(string(rules), -1) {
		want = append(want, m[1])
	}
	b, err := os.ReadFile("../../api/openapi/coordd.swagger.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Info struct {
			Title string `json:"title"`
		} `json:"info"`
		Paths               map[string]map[string]any `json:"paths"`
		SecurityDefinitions map[string]struct {
			Type string `json:"type"`
			Name string `json:"name"`
			In   string `json:"in"`
		} `json:"securityDefinitions"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Info.Title != "coordd HTTP/JSON API" {
		t.Errorf("title %q: api/http/openapi.yaml's options were not applied (do they name the first .proto file?)", doc.Info.Title)
	}
	var got []string
	for path, ops := range doc.Paths {
		got = append(got, path)
		if _, ok := ops["post"]; !ok || len(ops) != 1 {
			t.Errorf("%s: operations %v, want post only", path, ops)
		}
		if !strings.HasPrefix(path, Prefix) || strings.Contains(path, "keepalive") || strings.Contains(path, "observe") {
			t.Errorf("path %s: not under %s, or a streaming RPC's", path, Prefix)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if len(want) < 36 || !slices.Equal(got, want) {
		t.Errorf("the document's paths\n%v\ndiffer from api/http/gateway.yaml's\n%v\n(regenerate: go tool -modfile=tools/go.mod buf generate)", got, want)
	}
	if k := doc.SecurityDefinitions["ApiKey"]; k.Type != "apiKey" || k.Name != "Authorization" || k.In != "header" {
		t.Errorf("securityDefinitions %+v, want the ApiKey in the Authorization header", doc.SecurityDefinitions)
	}
}

// TestCodeNames: the reasons and span codes are google.rpc.Code's names.
func TestCodeNames(t *testing.T) {
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		if got, want := codeName(c), code.Code_name[int32(c)]; got != want {
			t.Errorf("codeName(%v) = %q, want %q", c, got, want)
		}
	}
}
