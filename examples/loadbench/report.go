package main

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// summary is one variant's figures over all rounds.
type summary struct {
	rps, rpsCV       float64 // requests/s over all slices; coefficient of variation between rounds
	p50, p99         time.Duration
	cpu, benchCPU    float64 // seconds per request
	mallocs, bytes   float64 // per request
	reads, writes    float64 // Caddy's system calls per request
	c1p50, c1p99     time.Duration
	c1ttfb           time.Duration // stream first byte at concurrency 1
	requests, c1reqs int
	// Against the base variant: medians over the rounds of the ratio within
	// each round, so that a slow round (a neighbour busy on the machine)
	// weighs on both sides of the ratio alike.
	rpsRatio, cpuRatio float64
	// cpuAdded is the median over the rounds of the CPU seconds per request
	// added to the base's in the same round.
	cpuAdded float64
}

func summarize(load, c1, baseLoad []sliceResult) summary {
	var s summary
	var elapsed time.Duration
	var lat []time.Duration
	var rates []float64
	for _, r := range load {
		s.requests += r.requests
		elapsed += r.elapsed
		s.cpu += r.caddyCPU
		s.benchCPU += r.benchCPU
		s.mallocs += r.mallocs
		s.bytes += r.bytes
		s.reads += r.reads
		s.writes += r.writes
		lat = append(lat, r.latency...)
		rates = append(rates, r.rps())
	}
	if s.requests > 0 {
		n := float64(s.requests)
		s.rps = n / elapsed.Seconds()
		s.cpu, s.benchCPU, s.mallocs, s.bytes = s.cpu/n, s.benchCPU/n, s.mallocs/n, s.bytes/n
		s.reads, s.writes = s.reads/n, s.writes/n
	}
	if len(rates) > 1 {
		var mean, sq float64
		for _, r := range rates {
			mean += r
		}
		mean /= float64(len(rates))
		for _, r := range rates {
			sq += (r - mean) * (r - mean)
		}
		s.rpsCV = math.Sqrt(sq/float64(len(rates)-1)) / mean
	}
	lat = sortedCopy(lat)
	s.p50, s.p99 = quantile(lat, 0.5), quantile(lat, 0.99)
	var c1lat, c1ttfb []time.Duration
	for _, r := range c1 {
		s.c1reqs += r.requests
		c1lat = append(c1lat, r.latency...)
		c1ttfb = append(c1ttfb, r.ttfb...)
	}
	c1lat = sortedCopy(c1lat)
	s.c1p50, s.c1p99 = quantile(c1lat, 0.5), quantile(c1lat, 0.99)
	s.c1ttfb = quantile(sortedCopy(c1ttfb), 0.5)
	if len(baseLoad) == len(load) {
		var rr, cr, ca []float64
		for i, r := range load {
			b := baseLoad[i]
			if b.requests == 0 || r.requests == 0 {
				continue
			}
			rr = append(rr, r.rps()/b.rps())
			if b.caddyCPU > 0 && r.caddyCPU > 0 {
				per, basePer := r.caddyCPU/float64(r.requests), b.caddyCPU/float64(b.requests)
				cr = append(cr, per/basePer)
				ca = append(ca, per-basePer)
			}
		}
		s.rpsRatio, s.cpuRatio, s.cpuAdded = median(rr), median(cr), median(ca)
	}
	return s
}

func median(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	x = slices.Clone(x)
	slices.Sort(x)
	if n := len(x); n%2 == 0 {
		return (x[n/2-1] + x[n/2]) / 2
	}
	return x[len(x)/2]
}

func us(d time.Duration) string { return fmt.Sprintf("%.0f", float64(d)/float64(time.Microsecond)) }

func signedUS(d time.Duration) string {
	return fmt.Sprintf("%+.0f", float64(d)/float64(time.Microsecond))
}

func ratio(r float64) string {
	if r == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", r)
}

const mb = 1 << 20

// target is one of the issues' targets and how this run fared.
type target struct {
	what, got string
	met       bool
}

func report(w io.Writer, out *outcome) {
	o := out.opts
	sums := map[string]summary{}
	var other, steal, wall float64
	for _, v := range out.vs {
		sums[v.name] = summarize(out.load[v.name], out.c1[v.name], out.load[v.base])
		for _, r := range out.load[v.name] {
			other, steal, wall = other+r.otherCPU, steal+r.stealCPU, wall+r.elapsed.Seconds()
		}
	}
	fmt.Fprintf(w, "loadbench %s  %s/%s, %d CPUs, %s\n", time.Now().UTC().Format("2006-01-02 15:04 UTC"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())
	req := "short chat requests"
	if o.history > 0 {
		req = fmt.Sprintf("requests with %d bytes of history", o.history)
	}
	if o.lean {
		req += fmt.Sprintf(", answered with %d tokens (lean upstream)", leanWords)
	}
	fmt.Fprintf(w, "%d rounds, each: every variant for %v at %d clients, then all of them for %v each at 1 client, one request at a time in turn; %s; %d token chunks per stream; combined key: %d members, %d lanes; run took %v\n",
		o.rounds, o.slice, o.conc, o.latSlice, req, o.chunks, o.members, out.lanes, out.elapsed.Round(time.Second))
	if wall > 0 {
		// Per-process and machine-wide times are sampled apart, so a quiet
		// machine can come out slightly below zero.
		fmt.Fprintf(w, "during the %d-client slices, other processes on the machine used %.0f%% of one CPU on average, and the hypervisor took %.0f%%\n",
			o.conc, max(100*other/wall, 0), 100*steal/wall)
	}
	fmt.Fprintln(w)

	if o.rounds > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "%d clients\treq/s\t±%%\t×base\tp50 µs\tp99 µs\tCaddy CPU µs/req\t×base\t+base\tallocs/req\t+base\tKB/req\treads/req\twrites/req\tclient+upstream CPU µs/req\t\n", o.conc)
		for _, v := range out.vs {
			s, b := sums[v.name], sums[v.base]
			cpu, added, allocs, addedAllocs, kb, reads, writes := "-", "-", "-", "-", "-", "-", "-"
			if v.caddy {
				cpu = fmt.Sprintf("%.0f", s.cpu*1e6)
				allocs = fmt.Sprintf("%.0f", s.mallocs)
				kb = fmt.Sprintf("%.1f", s.bytes/1024)
				if s.reads > 0 || s.writes > 0 {
					reads, writes = fmt.Sprintf("%.1f", s.reads), fmt.Sprintf("%.1f", s.writes)
				}
				if sums[v.base].requests > 0 && v.base != vDirect && v.base != vDirectStream && v.base != vDirectLong {
					added = fmt.Sprintf("%+.1f", s.cpuAdded*1e6)
					addedAllocs = fmt.Sprintf("%+.0f", s.mallocs-b.mallocs)
				}
			}
			fmt.Fprintf(tw, "%s\t%.0f\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.0f\t\n", v.name, s.rps, s.rpsCV*100, ratio(s.rpsRatio),
				us(s.p50), us(s.p99), cpu, ratio(s.cpuRatio), added, allocs, addedAllocs, kb, reads, writes, s.benchCPU*1e6)
		}
		tw.Flush()
		fmt.Fprintln(w, "±%: variation of req/s between rounds; ×base: median over the rounds of the ratio to the base variant in the same round;")
		fmt.Fprintln(w, "CPU +base: median over the rounds of the Caddy CPU µs per request added to the base's in the same round; allocs +base: over the whole run;")
		fmt.Fprintln(w, "reads, writes: Caddy's read and write system calls per request (/proc/<pid>/io), to the client and to the upstream, a few µs each on loopback")
		fmt.Fprintln(w)
		reportStreamCosts(w, out, sums)

		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "1 client\trequests\tp50 µs\t+base\tp99 µs\tfirst byte p50 µs\t+base\t+buffered\t\n")
		buffered := sums[vProxyBuffered]
		for _, v := range out.vs {
			s, b := sums[v.name], sums[v.base]
			add, ttfb, addTTFB, addBuffered := "-", "-", "-", "-"
			if v.base != "" {
				add = signedUS(s.c1p50 - b.c1p50)
			}
			if v.stream {
				ttfb = us(s.c1ttfb)
				if v.base != "" {
					addTTFB = signedUS(s.c1ttfb - b.c1ttfb)
				}
				if v.base == vProxyStream && v.name != vProxyBuffered && buffered.c1reqs > 0 {
					addBuffered = signedUS(s.c1ttfb - buffered.c1ttfb)
				}
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", v.name, s.c1reqs, us(s.c1p50), add, us(s.c1p99), ttfb, addTTFB, addBuffered)
		}
		tw.Flush()
		fmt.Fprintln(w, "base: the upstream called directly for reverse_proxy rows, the bare reverse_proxy (same kind, streaming or not) for gate rows")
		fmt.Fprintln(w, "1 client: the variants take turns request by request, in a new random order each time round, so that all are timed under the same conditions")
		fmt.Fprintf(w, "streams at 1 client: the upstream pauses %v after the first chunk, so the first byte is timed on its own\n", firstChunkGap)
		if buffered.c1reqs > 0 {
			fmt.Fprintln(w, "+buffered: first byte against reverse_proxy buffered stream, a bare proxy that reads the whole body before it forwards any (request_buffers), as the gate must to check it")
		}
		if slices.ContainsFunc(out.vs, func(v *variant) bool { return strings.HasSuffix(v.name, " twin") }) {
			fmt.Fprintln(w, "twin: a second bare reverse_proxy site, identical to the first; its +base is the noise between two equal variants in this run")
		}
		fmt.Fprintln(w)
	}

	reportCluster(w, out.cluster)

	var targets []target
	if len(out.flush) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "chunk flushing: %d tokens %v apart\ttokens\tdelay p50 µs\tdelay max µs\t\n", pacedTokens, upstreamPace)
		for _, v := range out.vs {
			d, ok := out.flush[v.name]
			if !ok {
				continue
			}
			d = sortedCopy(d)
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t\n", v.name, len(d), us(quantile(d, 0.5)), us(d[len(d)-1]))
			if v.target {
				// Flushed as it arrives: every token reached the client before
				// the upstream sent the next one.
				targets = append(targets, target{"each chunk flushed as it arrives (issue 6): " + v.name,
					fmt.Sprintf("max delay %s µs (< %v)", us(d[len(d)-1]), upstreamPace), d[len(d)-1] < upstreamPace})
			}
		}
		tw.Flush()
		fmt.Fprintln(w, "delay: from the upstream writing a token to the client reading it")
		fmt.Fprintln(w)
	}

	for i, m := range out.mem {
		fmt.Fprintf(w, "%d slow streams (a token a second) open at once through %s, opened in %v:\n",
			m.streams, m.what, m.openTime.Round(time.Millisecond))
		fmt.Fprintf(w, "  Caddy heap in use %.1f MB (idle %.1f MB); live heap after GC %.1f MB (idle %.1f MB), %.1f KB per stream; goroutines %.0f (idle %.0f); RSS %.1f MB (idle %.1f MB)\n",
			m.openInuse/mb, m.idleInuse/mb, m.openLive/mb, m.idleLive/mb, m.perStream()/1024, m.goroutines, m.idleGoroutines, m.openRSS/mb, m.idleRSS/mb)
		if i == len(out.mem)-1 {
			fmt.Fprintln(w)
			targets = append(targets, target{fmt.Sprintf("%d slow streams through the gate hold < 100 MB of heap (issue 6)", m.streams),
				fmt.Sprintf("%.1f MB in use", m.openInuse/mb), m.openInuse < 100*mb})
		}
	}

	if o.rounds > 0 {
		targets = append(rowTargets(out, sums), targets...)
	}
	if len(targets) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "target\tthis run\tresult")
		for _, t := range targets {
			verdict := "met"
			if !t.met {
				verdict = "NOT MET"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", t.what, t.got, verdict)
		}
		tw.Flush()
	}
}

// rowTargets judges the variants issues 6 and 15 set targets for: issue 6's
// throughput, added latency and first byte, and issue 15's CPU and
// allocations per request and CPU per streamed chunk.
func rowTargets(out *outcome, sums map[string]summary) []target {
	o := out.opts
	var t []target
	for _, v := range out.vs {
		s, b := sums[v.name], sums[v.base]
		if !v.target || b.requests == 0 {
			continue
		}
		if d := s.mallocs - b.mallocs; b.mallocs > 0 {
			t = append(t, target{"allocations per request ≤ reverse_proxy's + 10 (issue 15): " + v.name, fmt.Sprintf("%+.0f", d), d <= 10})
		}
		if v.stream {
			t = append(t, firstByteTarget(o, v, s, b, sums[vProxyBuffered]))
			if c, ok := chunkCost(out, sums, v); ok {
				t = append(t, target{"added Caddy CPU per streamed chunk ≤ 1 µs (issue 15): " + v.name, fmt.Sprintf("%.2f µs", c.perChunk), c.perChunk <= 1})
			}
			continue
		}
		r := s.rpsRatio
		t = append(t, target{"throughput ≥ 0.85 × reverse_proxy (issue 6): " + v.name, fmt.Sprintf("%.2f", r), r >= 0.85})
		d := s.c1p50 - b.c1p50
		t = append(t, target{"added p50 at 1 client ≤ 50 µs (issue 6): " + v.name, signedUS(d) + " µs", d <= 50*time.Microsecond})
		if c := s.cpuRatio; c > 0 {
			limit := cpuTarget(v.name, o.history)
			t = append(t, target{fmt.Sprintf("Caddy CPU per request ≤ %.2f × reverse_proxy (issue 15): %s", limit, v.name),
				fmt.Sprintf("%.2f (%+.1f µs)", c, s.cpuAdded*1e6), c <= limit})
		}
	}
	return t
}

// firstByteTarget judges issue 6's first-byte bound. Issue 6 set it for
// short requests against the streaming bare proxy, and there it stays. A
// long body (-history) arrives in several reads, which the bare proxy
// forwards as they come while the gate must hold them until it has checked
// the whole body. So with a history the bound is judged against a bare
// proxy that also reads the whole body first (request_buffers); the gap to
// the streaming proxy is printed beside it.
func firstByteTarget(o options, v *variant, s, bare, buffered summary) target {
	const bound = 50 * time.Microsecond
	d := s.c1ttfb - bare.c1ttfb
	if o.history == 0 || buffered.c1reqs == 0 {
		return target{"added first-byte p50 ≤ 50 µs (issue 6): " + v.name, signedUS(d) + " µs", d <= bound}
	}
	db := s.c1ttfb - buffered.c1ttfb
	return target{"added first-byte p50 ≤ 50 µs beyond reading the body first (issue 6, long body): " + v.name,
		fmt.Sprintf("%s µs (%s over reverse_proxy; the buffering proxy: %s)", signedUS(db), signedUS(d), signedUS(buffered.c1ttfb-bare.c1ttfb)),
		db <= bound}
}

// streamCost is what a streamed variant adds to the bare proxy's stream:
// per chunk, and once per stream beyond what the same request adds
// unstreamed.
type streamCost struct {
	perChunk, once float64 // µs
	onceKnown      bool    // the same request unstreamed was run too
}

// chunkCost measures v's cost per chunk as what its long stream adds beyond
// it (each against the bare proxy's stream of the same length), over the
// extra chunks. That leaves out what a stream costs once (its first and
// last events, a write or two more or fewer than the bare proxy's), which
// spreading a stream's whole added cost over its chunks would count in.
func chunkCost(out *outcome, sums map[string]summary, v *variant) (streamCost, bool) {
	o := out.opts
	s, l := sums[v.name], sums[longName(v.name)]
	if l.requests == 0 || s.requests == 0 {
		return streamCost{}, false
	}
	c := streamCost{perChunk: (l.cpuAdded - s.cpuAdded) * 1e6 / float64(o.chunks*(longFactor-1))}
	if plain := sums[strings.Replace(v.name, " stream", "", 1)]; plain.requests > 0 {
		c.once = (s.cpuAdded-plain.cpuAdded)*1e6 - c.perChunk*float64(o.chunks)
		c.onceKnown = true
	}
	return c, true
}

// reportStreamCosts splits what each measured stream variant adds into a
// cost per chunk and a cost once per stream.
func reportStreamCosts(w io.Writer, out *outcome, sums map[string]summary) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	rows := 0
	for _, v := range out.vs {
		c, ok := chunkCost(out, sums, v)
		if v.base != vProxyStream || !ok {
			continue
		}
		if rows == 0 {
			fmt.Fprintf(tw, "streams: Caddy CPU added\tper chunk µs\tonce per stream µs\t\n")
		}
		rows++
		once := "-"
		if c.onceKnown {
			once = fmt.Sprintf("%+.1f", c.once)
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%s\t\n", v.name, c.perChunk, once)
	}
	if rows == 0 {
		return
	}
	tw.Flush()
	fmt.Fprintf(w, "per chunk: what the long stream (%d× the chunks) adds beyond the stream, each against reverse_proxy's stream of its length, over the extra chunks;\n", longFactor)
	fmt.Fprintln(w, "once per stream: the rest of what the stream adds beyond the same request unstreamed (first and last events, writes)")
	fmt.Fprintln(w)
}

// cpuTarget is issue 15's bound on a translated row's Caddy CPU per request,
// as a multiple of the bare proxy's: for short requests 1.08 × chat → chat
// and 1.12 × a translation; with a long history 1.15 × every row.
func cpuTarget(name string, history int) float64 {
	switch {
	case history > 0:
		return 1.15
	case strings.Contains(name, "chat→chat"):
		return 1.08
	default:
		return 1.12
	}
}
