package main

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/coordd/coordd/internal/server"
)

// TestHTTPAPIOffByDefault: /v1/ is served only with http_api.enabled.
// Then an HTTP/JSON call is a gRPC call of the daemon: the API key of its
// Authorization header gives its namespace (auth.api_keys), and it is
// counted in the gRPC metrics and logged with its namespace like any call.
func TestHTTPAPIOffByDefault(t *testing.T) {
	hc := newHTTPClient()
	defer hc.CloseIdleConnections()
	post := func(url, key, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	const lock = `{"name": "jobs", "ttl": "30s"}`

	off := startInProcess(t, nil)
	if code, body := post("http://"+off.httpAddr+"/v1/lock/lock", "", lock); code != http.StatusNotFound {
		t.Errorf("http_api off: POST /v1/lock/lock answered %d %s, want 404", code, body)
	}

	const key = "http-api-test-key-0123456789"
	var log lockedBuffer
	on := startInProcessLogging(t, &log, func(c *Config) {
		c.HTTPAPI.Enabled = true
		c.Auth.Enabled = true
		c.Auth.APIKeys = []server.APIKey{{Namespace: "team-a", Key: key}}
	})
	url := "http://" + on.httpAddr + "/v1/lock/lock"
	if code, body := post(url, "", lock); code != http.StatusUnauthorized || !strings.Contains(body, `"reason":"UNAUTHENTICATED"`) {
		t.Errorf("no key: %d %s", code, body)
	}
	if code, body := post(url, key, lock); code != http.StatusOK || !strings.Contains(body, `"acquired":true`) {
		t.Fatalf("Lock: %d %s", code, body)
	}
	_, metrics := httpGet(t, hc, "http://"+on.httpAddr+"/metrics")
	for _, want := range []string{
		`grpc_server_handled_total{grpc_code="OK",grpc_method="Lock",grpc_service="coord.v1.LockService",grpc_type="unary"} 1`,
		`grpc_server_handled_total{grpc_code="Unauthenticated",grpc_method="Lock",grpc_service="coord.v1.LockService",grpc_type="unary"} 1`,
		`coordd_auth_failures_total{reason="UNAUTHENTICATED"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
	if !strings.Contains(log.String(), "grpc.method=Lock") || !strings.Contains(log.String(), "namespace=team-a") {
		t.Errorf("no call log line of the HTTP call with its namespace in:\n%s", log.String())
	}
}
