package main

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/coordd/coordd/internal/console"
)

// TestConsoleOffByDefault: /ui/ is served only with ui.enabled, and then
// its JSON speaks for the default namespace when auth is off.
func TestConsoleOffByDefault(t *testing.T) {
	hc := newHTTPClient()
	defer hc.CloseIdleConnections()
	off := startInProcess(t, nil)
	if code, _ := httpGet(t, hc, "http://"+off.httpAddr+"/ui/"); code != http.StatusNotFound {
		t.Errorf("console off: /ui/ answered %d, want 404", code)
	}
	on := startInProcess(t, func(c *Config) { c.UI.Enabled = true })
	if code, body := httpGet(t, hc, "http://"+on.httpAddr+"/ui/"); code != http.StatusOK || !strings.Contains(body, "coordd console") {
		t.Errorf("console on: /ui/ answered %d:\n%s", code, body)
	}
	req, _ := http.NewRequest("GET", "http://"+on.httpAddr+"/ui/api/whoami", nil)
	req.Header.Set(console.Header, "1")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = io.Copy(&b, resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(b.String(), `"namespace":"default"`) {
		t.Errorf("whoami: %d %s", resp.StatusCode, b.String())
	}
}
