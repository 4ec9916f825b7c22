package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// goRuntime is what coordd's /metrics says of its Go runtime at one
// instant (client_golang's Go and process collectors): with RSS alone, the
// sessions scenario could not tell stacks from heap.
type goRuntime struct {
	Goroutines int64 `json:"goroutines"`
	HeapInuse  int64 `json:"heap_inuse_bytes"`
	StackInuse int64 `json:"stack_inuse_bytes"`
	Sys        int64 `json:"go_sys_bytes"`
	RSS        int64 `json:"rss_bytes"`
	Sessions   int64 `json:"sessions_active"`
}

// scrapeRuntime reads url (coordd's /metrics).
func scrapeRuntime(ctx context.Context, url string) (goRuntime, error) {
	var g goRuntime
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return g, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return g, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return g, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return parseRuntime(resp.Body)
}

// parseRuntime picks the unlabelled samples it knows out of the Prometheus
// text format.
func parseRuntime(r io.Reader) (goRuntime, error) {
	var g goRuntime
	fields := map[string]*int64{
		"go_goroutines":                 &g.Goroutines,
		"go_memstats_heap_inuse_bytes":  &g.HeapInuse,
		"go_memstats_stack_inuse_bytes": &g.StackInuse,
		"go_memstats_sys_bytes":         &g.Sys,
		"process_resident_memory_bytes": &g.RSS,
		"coordd_session_streams":        &g.Sessions,
	}
	found := 0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		p, known := fields[name]
		if !known {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err != nil {
			return g, fmt.Errorf("%s: %w", name, err)
		}
		*p = int64(v)
		found++
	}
	if err := sc.Err(); err != nil {
		return g, err
	}
	if found == 0 {
		return g, fmt.Errorf("no Go runtime metrics")
	}
	return g, nil
}
