package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/timeblock/timeblock/caddymodule/e2e"
)

func TestMain(m *testing.M) { e2e.Main(m) }

// TestQuickRun runs every phase of the benchmark in its smallest form, so
// that the program keeps working as the plugin changes. Its figures mean
// nothing.
func TestQuickRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts caddy and sends a few thousand requests")
	}
	o := defaults()
	o.quick()
	o.caddyBin = e2e.Binary(t)
	var out, log bytes.Buffer
	if err := run(o, &out, &log); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	report := out.String()
	t.Log("\n" + report)
	for _, want := range []string{
		"upstream direct", "reverse_proxy stream",
		"gate chat→chat (key)", "gate messages→chat (combined key)", "gate messages→chat stream (combined key)",
		"chunk flushing", "slow streams", "target", "(issue 15)",
		"gate responses→chat long stream (key)", "once per stream µs", "writes/req",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("the report has no %q", want)
		}
	}
	// The two-node phase ran, or says why not (no PostgreSQL here).
	if !strings.Contains(report, "2 nodes, key split across both (20 lanes)") && !strings.Contains(report, "two-node phase skipped") {
		t.Error("the report has neither the two-node rows nor why they are missing")
	}
}

// The concurrency-1 pass times every variant, a stream with the upstream
// asked to pause after its first chunk.
func TestAlternateTimesEveryVariant(t *testing.T) {
	var mu sync.Mutex
	hits := map[string][]string{} // path → mode header of each request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path] = append(hits[r.URL.Path], r.Header.Get(modeHeader))
		mu.Unlock()
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	h := http.Header{"Content-Type": {"application/json"}}
	gap := h.Clone()
	gap.Set(modeHeader, "gap")
	vs := []*variant{
		{name: "plain", url: srv.URL + "/plain", body: []byte(`{}`), header: h},
		{name: "stream", url: srv.URL + "/stream", body: []byte(`{}`), header: h, gapHeader: gap, stream: true},
	}
	l := &loader{client: srv.Client()}
	res, err := l.alternate(vs, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		r := res[v.name]
		if r.requests == 0 || len(r.latency) != r.requests {
			t.Errorf("%s: %d requests, %d latencies", v.name, r.requests, len(r.latency))
		}
		wantTTFB := 0
		if v.stream {
			wantTTFB = r.requests
		}
		if len(r.ttfb) != wantTTFB {
			t.Errorf("%s: %d first-byte times for %d requests", v.name, len(r.ttfb), r.requests)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	// Each time round sends every variant once.
	if len(hits["/plain"]) != len(hits["/stream"]) {
		t.Errorf("the variants did not take turns: %d plain, %d stream", len(hits["/plain"]), len(hits["/stream"]))
	}
	for _, m := range hits["/stream"] {
		if m != "gap" {
			t.Fatalf("a stream was sent without the pause: mode %q", m)
		}
	}
	for _, m := range hits["/plain"] {
		if m != "" {
			t.Fatalf("a plain request carried mode %q", m)
		}
	}
}
