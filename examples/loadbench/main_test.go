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
		"reverse_proxy buffered stream", "+buffered",
		"gate gemini→chat (key)", "gate gemini→chat long stream (key)",
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

// Issue 6's first-byte bound is judged against the bare proxy on a short
// request, and against the proxy that reads the body first on a long one.
func TestFirstByteTarget(t *testing.T) {
	v := &variant{name: "gate messages→chat stream (key)"}
	at := func(us int) summary { return summary{c1ttfb: time.Duration(us) * time.Microsecond, c1reqs: 100} }
	bare, buffered := at(600), at(630)
	for _, c := range []struct {
		name      string
		history   int
		gate      summary
		buffered  summary
		met       bool
		whatHas   string
		gotPrefix string
	}{
		{"short, within", 0, at(640), buffered, true, "(issue 6)", "+40 µs"},
		{"short, over: the buffered proxy does not count", 0, at(660), buffered, false, "(issue 6)", "+60 µs"},
		{"long, within the buffered proxy's", 20000, at(660), buffered, true, "beyond reading the body first", "+30 µs (+60 over reverse_proxy; the buffering proxy: +30)"},
		{"long, over the buffered proxy's", 20000, at(690), buffered, false, "beyond reading the body first", "+60 µs"},
		{"long, no buffered proxy run", 20000, at(660), summary{}, false, "(issue 6)", "+60 µs"},
	} {
		o := defaults()
		o.history = c.history
		got := firstByteTarget(o, v, c.gate, bare, c.buffered)
		if got.met != c.met || !strings.Contains(got.what, c.whatHas) || !strings.HasPrefix(got.got, c.gotPrefix) {
			t.Errorf("%s: got %+v; want met %v, what with %q, result from %q", c.name, got, c.met, c.whatHas, c.gotPrefix)
		}
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
