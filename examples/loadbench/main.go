// Command loadbench measures what Timeblock costs on top of a bare Caddy
// reverse_proxy. In one run it starts an instant chat-completions upstream
// (in this process), builds and starts Caddy with the plugin on loopback
// ports, buys keys through the account API, and then, interleaving the
// variants round after round:
//
//   - calls the upstream directly, through a bare reverse_proxy, and through
//     timeblock_gate + timeblock_translate (chat → chat, messages → chat,
//     streaming messages → chat; with a consumption key and with a combined
//     key holding many lanes), and through the gate alone, to tell its cost
//     from the translator's; and, for the first byte of a long body, through
//     a bare reverse_proxy that reads the whole body before forwarding it
//     (request_buffers), as the gate must to check it;
//   - measures requests/s, p50/p99 latency at a fixed concurrency and at
//     concurrency 1, time to first byte of streams (at concurrency 1, with
//     the upstream pausing after the first chunk), Caddy's CPU seconds and
//     allocations per request, and each variant's ratio to the bare proxy;
//   - checks that stream chunks are flushed as they arrive, and how much
//     heap 1,000 slow streams through the gate hold;
//   - with a PostgreSQL server (-pg, $TIMEBLOCK_TEST_DATABASE_URL or a local
//     one), starts two more Caddy processes on a throwaway database and
//     compares one node under load and a key split across both nodes (lanes
//     shared through PostgreSQL) with the single-node gate (cluster.go).
//
// Run it from the repository root:
//
//	go run ./examples/loadbench            # about 2¾ minutes, plus building caddy
//	go run ./examples/loadbench -quick     # a few seconds, figures meaningless
//	go run ./examples/loadbench -profile /tmp/prof -rounds 0 -streams 0
//	go run ./examples/loadbench -cluster only  # the two-node rows and the single-node gate
//
// docs/performance.md explains the method and holds the latest figures.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

type options struct {
	caddyBin    string
	conc        int
	rounds      int
	slice       time.Duration
	latSlice    time.Duration
	warm        time.Duration
	chunks      int
	history     int
	lean        bool
	members     int
	streams     int
	hold        time.Duration
	flushRuns   int
	only        string
	profileDir  string
	profileOf   string
	profileTime time.Duration
	cluster     string // "on" (when PostgreSQL answers), "off", "only"
	pg          string // admin DSN of the two-node phase's server
}

func defaults() options {
	return options{
		conc:        16,
		rounds:      10,
		slice:       600 * time.Millisecond,
		latSlice:    400 * time.Millisecond,
		warm:        300 * time.Millisecond,
		chunks:      50,
		members:     8,
		streams:     1000,
		hold:        2 * time.Second,
		flushRuns:   5,
		profileOf:   "gate messages→chat (key)",
		profileTime: 10 * time.Second,
		cluster:     "on",
	}
}

// quick is a smoke run: every phase, tiny.
func (o *options) quick() {
	o.conc, o.rounds, o.slice, o.latSlice, o.warm = 4, 1, 200*time.Millisecond, 100*time.Millisecond, 50*time.Millisecond
	o.chunks, o.members, o.streams, o.hold, o.flushRuns = 5, 2, 40, 200*time.Millisecond, 1
}

func main() {
	o := defaults()
	quick := flag.Bool("quick", false, "a smoke run of every phase in a few seconds (figures are meaningless)")
	flag.StringVar(&o.caddyBin, "caddy", "", "caddy binary with the plugin (default: build ./cmd/caddy into a temp dir)")
	flag.IntVar(&o.conc, "c", o.conc, "concurrent clients in the throughput pass (a consumption key has 20 lanes; more clients queue for them)")
	flag.IntVar(&o.rounds, "rounds", o.rounds, "rounds; each runs every variant for a slice at -c, then all of them in turn at concurrency 1")
	flag.DurationVar(&o.slice, "slice", o.slice, "time per variant per round in the throughput pass")
	flag.DurationVar(&o.latSlice, "latency-slice", o.latSlice, "time per variant per round in the concurrency-1 pass (its requests alternate with the other variants')")
	flag.DurationVar(&o.warm, "warm", o.warm, "warm-up per variant before the first round")
	flag.IntVar(&o.chunks, "chunks", o.chunks, "token chunks per streamed response")
	flag.BoolVar(&o.lean, "lean", false, "the upstream answers a non-streaming request with a short (~300-byte) completion, so that the proxies' fixed cost per request is not hidden by relaying a long answer")
	flag.IntVar(&o.history, "history", 0, "bytes of conversation history before the question in every request (0: a short chat)")
	flag.IntVar(&o.members, "members", o.members, "subscriptions (20 lanes each) folded into the combined key")
	flag.IntVar(&o.streams, "streams", o.streams, "slow streams held open at once for the memory check (0 skips it)")
	flag.DurationVar(&o.hold, "hold", o.hold, "how long the slow streams stay open before the heap is read")
	flag.IntVar(&o.flushRuns, "flush-runs", o.flushRuns, "paced streams per streaming variant in the flush check")
	flag.StringVar(&o.only, "only", "", "run only the variants whose name contains one of these comma-separated strings (e.g. \"stream\")")
	flag.StringVar(&o.profileDir, "profile", "", "save profiles of Caddy into this directory: CPU and allocations under load, heap with the slow streams open")
	flag.StringVar(&o.profileOf, "profile-variant", o.profileOf, "variant to load while profiling")
	flag.DurationVar(&o.profileTime, "profile-time", o.profileTime, "profile duration")
	flag.StringVar(&o.cluster, "cluster", o.cluster, "the two-node phase (two Caddy processes on one PostgreSQL database): on (skipped with a note when no PostgreSQL answers), off, or only (skip the single-node variants, keep the single-node gate it is compared with)")
	flag.StringVar(&o.pg, "pg", "", "admin DSN of the PostgreSQL server for the two-node phase (default $TIMEBLOCK_TEST_DATABASE_URL, else "+defaultPostgres+"); it creates a database of its own and drops it")
	flag.Parse()
	if *quick {
		o.quick()
	}
	if err := run(o, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "loadbench:", err)
		os.Exit(1)
	}
}

// outcome is everything a run measured, for the report.
type outcome struct {
	opts    options
	vs      []*variant
	load    map[string][]sliceResult
	c1      map[string][]sliceResult
	flush   map[string][]time.Duration
	mem     []memResult // bare proxy, then gate
	lanes   int
	elapsed time.Duration
	cluster *clusterOutcome
}

func run(o options, stdout, stderr io.Writer) error {
	began := time.Now()
	logf := func(format string, args ...any) { fmt.Fprintf(stderr, format+"\n", args...) }
	dir, err := os.MkdirTemp("", "loadbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// Interrupted, remove the build and the store; caddy dies with this
	// process (Pdeathsig on Linux).
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer func() { signal.Stop(sig); close(sig) }()
	go func() {
		if _, ok := <-sig; ok {
			os.RemoveAll(dir)
			os.Exit(130)
		}
	}()
	bin := o.caddyBin
	if bin == "" {
		logf("building caddy from ./cmd/caddy …")
		if bin, err = buildCaddy(dir); err != nil {
			return err
		}
	}
	up, err := startUpstream(o.chunks, o.lean)
	if err != nil {
		return err
	}
	defer up.close()
	memKeys := (o.streams + seatsPerSubscription - 1) / seatsPerSubscription
	c, err := startCaddy(bin, dir, strings.TrimPrefix(up.url, "http://"), memKeys*seatsPerSubscription)
	if err != nil {
		return err
	}
	defer c.stop()
	logf("caddy pid %d: proxy %s (twin %s), gate %s, gate only %s, admin %s; upstream %s", c.pid, c.proxyURL, c.twinURL, c.gateURL, c.gateOnlyURL, c.adminURL, up.url)
	t := time.Now()
	k, err := setupAccounts(c, o.members, memKeys)
	if err != nil {
		return fmt.Errorf("%w\ncaddy log:\n%s", err, c.logTail())
	}
	logf("accounts ready in %v: a key with %d lanes, a combined key with %d, %d keys for the slow streams",
		time.Since(t).Round(time.Millisecond), seatsPerSubscription, k.lanes, len(k.mem))
	if err := c.calibrate(); err != nil {
		return fmt.Errorf("reading caddy's /metrics: %w", err)
	}

	l := newLoader(c, o.conc)
	out := &outcome{opts: o, load: map[string][]sliceResult{}, c1: map[string][]sliceResult{},
		flush: map[string][]time.Duration{}, lanes: k.lanes}
	// The variants asked for, and the ones they are compared with.
	bodies := makeBodies(o.history)
	all := variants(up, c, k, bodies)
	clusterRounds := o.rounds
	if o.cluster == "only" {
		o.only, o.rounds, o.flushRuns, o.streams = "gate chat→chat (key)", 0, 0, 0
		out.opts = o
	}
	want := map[string]bool{}
	for i := len(all) - 1; i >= 0; i-- {
		// A long stream comes with its stream, which its cost per chunk
		// is measured against.
		if v := all[i]; want[v.name] || selected(v.name, o.only) || selected(strings.Replace(v.name, " long stream", " stream", 1), o.only) {
			want[v.name], want[v.base] = true, true
			if v.target && v.stream {
				want[vProxyBuffered] = true // a long body's first byte is judged against it
			}
		}
	}
	for _, v := range all {
		if want[v.name] {
			out.vs = append(out.vs, v)
		}
	}
	for _, v := range out.vs {
		if err := l.verify(v); err != nil {
			return err
		}
		if _, err := l.run(v, o.conc, o.warm, false); err != nil {
			return err
		}
	}
	for r := range o.rounds {
		logf("round %d of %d", r+1, o.rounds)
		// Start each round at another variant, so none always follows the same one.
		for i := range out.vs {
			v := out.vs[(i+r)%len(out.vs)]
			sr, err := l.run(v, o.conc, o.slice, true)
			if err != nil {
				return err
			}
			if sr.errors > 0 {
				return fmt.Errorf("%s: %d of %d requests failed, first: %v", v.name, sr.errors, sr.requests+sr.errors, sr.firstErr)
			}
			out.load[v.name] = append(out.load[v.name], sr)
		}
		c1, err := l.alternate(out.vs, o.latSlice*time.Duration(len(out.vs)))
		if err != nil {
			return err
		}
		for _, v := range out.vs {
			out.c1[v.name] = append(out.c1[v.name], c1[v.name])
		}
	}
	if o.flushRuns > 0 {
		for _, v := range out.vs {
			if !v.stream || !v.caddy || v.long { // a paced stream has pacedTokens, long or not
				continue
			}
			d, err := l.flushDelays(v, up, o.flushRuns)
			if err != nil {
				return err
			}
			out.flush[v.name] = d
		}
	}
	if o.streams > 0 {
		heapProfile := ""
		if o.profileDir != "" {
			if err := os.MkdirAll(o.profileDir, 0o755); err != nil {
				return err
			}
			heapProfile = filepath.Join(o.profileDir, "heap-streams.pprof")
		}
		for _, m := range []struct {
			what, profile string
			req           slowStream
		}{
			{"reverse_proxy, chat", "", proxySlowStream(c)},
			{"gate messages→chat", heapProfile, gateSlowStream(c, k.mem)},
		} {
			logf("memory check: %d slow streams through %s", o.streams, m.what)
			res, err := memoryCheck(c, m.what, m.req, o.streams, o.hold, m.profile)
			if err != nil {
				return fmt.Errorf("memory check, %s: %w\ncaddy log:\n%s", m.what, err, c.logTail())
			}
			out.mem = append(out.mem, res)
		}
	}
	if o.cluster != "off" {
		co := o
		co.rounds = clusterRounds
		cl, err := clusterPhase(co, bin, dir, up, c, k, bodies, logf)
		if err != nil {
			return err
		}
		out.cluster = cl
	}
	if o.profileDir != "" {
		if err := profile(l, c, out.vs, o); err != nil {
			return err
		}
		logf("profiles in %s; read them with: go tool pprof -top %s", o.profileDir, filepath.Join(o.profileDir, "cpu.pprof"))
	}
	out.elapsed = time.Since(began)
	report(stdout, out)
	return nil
}

func selected(name, only string) bool {
	if only == "" {
		return true
	}
	for _, s := range strings.Split(only, ",") {
		if s = strings.TrimSpace(s); s != "" && strings.Contains(name, s) {
			return true
		}
	}
	return false
}

// profile loads one variant while Caddy records CPU and allocation profiles.
func profile(l *loader, c *caddyProc, vs []*variant, o options) error {
	var v *variant
	for _, x := range vs {
		if x.name == o.profileOf {
			v = x
		}
	}
	if v == nil {
		return fmt.Errorf("-profile-variant %q is not among the variants run", o.profileOf)
	}
	if err := os.MkdirAll(o.profileDir, 0o755); err != nil {
		return err
	}
	ctx := context.Background()
	errs := make(chan error, 2)
	go func() { errs <- c.profile(ctx, "profile", o.profileTime, filepath.Join(o.profileDir, "cpu.pprof")) }()
	go func() { errs <- c.profile(ctx, "allocs", o.profileTime, filepath.Join(o.profileDir, "allocs.pprof")) }()
	r, err := l.run(v, o.conc, o.profileTime+500*time.Millisecond, true)
	if err != nil {
		return err
	}
	for range 2 {
		if err := <-errs; err != nil {
			return err
		}
	}
	// The count turns the profile's seconds into a cost per request, so that
	// profiles of two variants can be compared.
	fmt.Fprintf(os.Stderr, "profiled %q: %d requests in %v, %.1f µs of Caddy CPU each\n",
		v.name, r.requests, r.elapsed.Round(time.Millisecond), r.caddyCPU*1e6/float64(max(r.requests, 1)))
	return nil
}
