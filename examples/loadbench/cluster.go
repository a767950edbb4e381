package main

// The two-node phase: two Caddy processes on one PostgreSQL database (lanes
// shared through it), against the single-node gate of the main run, in the
// same rounds. Rows: one node under load, a key whose traffic is split
// across both nodes, and the same with fewer lanes than clients, so that
// lanes keep moving between the nodes.

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
)

// defaultPostgres is where the phase looks for a server when -pg is not
// given and TIMEBLOCK_TEST_DATABASE_URL is not set (an admin DSN: the phase
// creates a database of its own and drops it).
const defaultPostgres = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// contendedLanes is the seats of the key of the contended rows: fewer lanes
// than clients, so requests queue and lanes move.
const contendedLanes = 4

type clusterRow struct {
	name  string
	vs    []*variant   // client i sends vs[i%len(vs)]
	procs []*caddyProc // whose CPU counts
	base  string       // the single-node row it is compared with ("" for those)
	c1    bool         // also timed at 1 client
}

type clusterResult struct {
	requests, errors int
	firstErr         error
	elapsed          time.Duration
	latency          []time.Duration
	caddyCPU, pgCPU  float64 // seconds
}

type clusterOutcome struct {
	rows []*clusterRow
	load map[string][]clusterResult
	c1   map[string][]time.Duration
	note string
	opts options // as the phase ran them
}

// bench database: a throwaway database on the admin DSN's server.
type benchDB struct {
	admin, dsn, name string
}

func createBenchDB(admin string) (*benchDB, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	name := "loadbench_" + strings.ToLower(rand.Text()[:10])
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return nil, err
	}
	u, err := url.Parse(admin)
	if err != nil {
		return nil, err
	}
	u.Path = "/" + name
	return &benchDB{admin: admin, dsn: u.String(), name: name}, nil
}

func (db *benchDB) drop() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, db.admin)
	if err != nil {
		return
	}
	defer conn.Close(context.Background())
	conn.Exec(ctx, "DROP DATABASE IF EXISTS "+db.name+" WITH (FORCE)")
}

// pgCPU is the CPU time of every backend connected to the bench database.
func (db *benchDB) cpu(conn *pgx.Conn, tick float64) float64 {
	rows, err := conn.Query(context.Background(), "SELECT pid FROM pg_stat_activity WHERE datname = $1", db.name)
	if err != nil {
		return 0
	}
	pids, _ := pgx.CollectRows(rows, pgx.RowTo[int32])
	var sum float64
	for _, pid := range pids {
		if s, err := procCPU(int(pid), tick); err == nil {
			sum += s
		}
	}
	return sum
}

// clusterPhase runs the two-node rows; single is the main run's Caddy and
// k its keys. It returns nil, with a note, when no PostgreSQL answers.
func clusterPhase(o options, bin, dir string, up *upstream, single *caddyProc, k *keys, b bodies, logf func(string, ...any)) (*clusterOutcome, error) {
	admin := o.pg
	if admin == "" {
		admin = os.Getenv("TIMEBLOCK_TEST_DATABASE_URL")
	}
	if admin == "" {
		admin = defaultPostgres
	}
	db, err := createBenchDB(admin)
	if err != nil {
		if o.pg != "" {
			return nil, fmt.Errorf("two-node phase: PostgreSQL at -pg: %w", err)
		}
		return &clusterOutcome{note: fmt.Sprintf("two-node phase skipped: no PostgreSQL (%v); give an admin DSN with -pg", err)}, nil
	}
	defer db.drop()
	pgConn, err := pgx.Connect(context.Background(), db.admin)
	if err != nil {
		return nil, err
	}
	defer pgConn.Close(context.Background())

	store := "store postgres " + db.dsn
	var nodes [2]*caddyProc
	for i := range nodes {
		d := filepath.Join(dir, "node"+strconv.Itoa(i))
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
		if nodes[i], err = startCaddyStore(bin, d, strings.TrimPrefix(up.url, "http://"), 0, store); err != nil {
			return nil, fmt.Errorf("two-node phase: %w", err)
		}
		defer nodes[i].stop()
	}
	a, bn := nodes[0], nodes[1]
	for _, n := range nodes {
		if err := n.calibrate(); err != nil {
			return nil, err
		}
	}
	logf("two nodes on PostgreSQL database %s: pids %d and %d", db.name, a.pid, bn.pid)
	key20, key4, err := clusterKeys(a, "loadbench-cluster@example.com")
	if err != nil {
		return nil, fmt.Errorf("two-node phase: %w\nnode log:\n%s", err, a.logTail())
	}
	_, single4, err := clusterKeys(single, "loadbench-contended@example.com")
	if err != nil {
		return nil, fmt.Errorf("two-node phase: %w", err)
	}

	chat := func(c *caddyProc, key string) *variant {
		return &variant{name: "chat", url: c.gateURL + "/v1/chat/completions", body: b.chat, header: chatHeader(key), caddy: true, check: checkChat}
	}
	const (
		rSingle  = "1 node, embedded store (key, 20 lanes)"
		rSingle4 = "1 node, embedded store (key, 4 lanes)"
	)
	out := &clusterOutcome{load: map[string][]clusterResult{}, c1: map[string][]time.Duration{}, opts: o}
	out.rows = []*clusterRow{
		{name: rSingle, vs: []*variant{chat(single, k.single)}, procs: []*caddyProc{single}, c1: true},
		{name: "2 nodes, one under load (key, 20 lanes)", vs: []*variant{chat(a, key20)}, procs: []*caddyProc{a, bn}, base: rSingle, c1: true},
		{name: "2 nodes, key split across both (20 lanes)", vs: []*variant{chat(a, key20), chat(bn, key20)}, procs: []*caddyProc{a, bn}, base: rSingle, c1: true},
		{name: rSingle4, vs: []*variant{chat(single, single4)}, procs: []*caddyProc{single}},
		{name: "2 nodes, key split across both (4 lanes)", vs: []*variant{chat(a, key4), chat(bn, key4)}, procs: []*caddyProc{a, bn}, base: rSingle4},
	}
	l := newLoader(single, o.conc)
	for _, r := range out.rows {
		for _, v := range r.vs {
			if err := l.verify(v); err != nil {
				return nil, err
			}
		}
		if _, err := runRow(l, r, db, pgConn, o.conc, o.warm); err != nil {
			return nil, err
		}
	}
	for round := range o.rounds {
		logf("two-node round %d of %d", round+1, o.rounds)
		for i := range out.rows {
			r := out.rows[(i+round)%len(out.rows)]
			res, err := runRow(l, r, db, pgConn, o.conc, o.slice)
			if err != nil {
				return nil, err
			}
			if res.errors > 0 {
				return nil, fmt.Errorf("%s: %d of %d requests failed, first: %v", r.name, res.errors, res.requests+res.errors, res.firstErr)
			}
			out.load[r.name] = append(out.load[r.name], res)
		}
		// One client: the rows take turns request by request; a split row
		// alternates between its nodes.
		buf := make([]byte, 32<<10)
		turn := map[string]int{}
		for deadline := time.Now().Add(o.latSlice * 3); time.Now().Before(deadline); {
			for _, r := range out.rows {
				if !r.c1 {
					continue
				}
				v := r.vs[turn[r.name]%len(r.vs)]
				turn[r.name]++
				total, _, err := l.do(context.Background(), v, v.header, buf, nil)
				if err != nil {
					return nil, fmt.Errorf("%s at 1 client: %w", r.name, err)
				}
				out.c1[r.name] = append(out.c1[r.name], total)
			}
		}
	}
	return out, nil
}

// clusterKeys makes a user on c with a 20-seat key and a contendedLanes-seat
// key of the bench pool.
func clusterKeys(c *caddyProc, email string) (key20, key4 string, err error) {
	a := &accountClient{c: c, http: &http.Client{Timeout: time.Minute}}
	user, err := a.call(http.MethodPost, c.adminURL+"/timeblock/users", "", map[string]any{"email": email}, http.StatusCreated)
	if err != nil {
		return "", "", err
	}
	a.token = user.Get("sessionToken").Str
	if _, err := a.api(http.MethodPost, "/api/billing/setup-intent", map[string]any{"paymentMethod": "pm_card_visa"}, http.StatusOK); err != nil {
		return "", "", err
	}
	for _, q := range []int{seatsPerSubscription, contendedLanes} {
		data, err := a.api(http.MethodPost, "/api/pools/bench/subscribe", map[string]any{
			"blocks": []string{"asia", "europe", "americas"}, "quantity": q,
		}, http.StatusCreated)
		if err != nil {
			return "", "", err
		}
		key, err := a.key(data.Get("id").Str)
		if err != nil {
			return "", "", err
		}
		if q == contendedLanes {
			key4 = key
		} else {
			key20 = key
		}
	}
	return key20, key4, nil
}

// runRow keeps conc clients busy with r for d and reads the CPU time of
// r's Caddy processes and of the bench database's backends around it.
func runRow(l *loader, r *clusterRow, db *benchDB, pgConn *pgx.Conn, conc int, d time.Duration) (clusterResult, error) {
	var res clusterResult
	tick := r.procs[0].clockTick
	cpu := func() (float64, error) {
		var sum float64
		for _, p := range r.procs {
			s, err := p.cpuSeconds()
			if err != nil {
				return 0, err
			}
			sum += s
		}
		return sum, nil
	}
	caddyBefore, err := cpu()
	if err != nil {
		return res, err
	}
	pgBefore := db.cpu(pgConn, tick)
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for i := range conc {
		v := r.vs[i%len(r.vs)]
		wg.Go(func() {
			buf := make([]byte, 32<<10)
			lat := make([]time.Duration, 0, 1024)
			errs := 0
			var firstErr error
			for time.Now().Before(deadline) {
				total, _, err := l.do(context.Background(), v, v.header, buf, nil)
				if err != nil {
					errs++
					if firstErr == nil {
						firstErr = err
					}
					continue
				}
				lat = append(lat, total)
			}
			mu.Lock()
			res.requests += len(lat)
			res.errors += errs
			if res.firstErr == nil {
				res.firstErr = firstErr
			}
			res.latency = append(res.latency, lat...)
			mu.Unlock()
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	caddyAfter, err := cpu()
	if err != nil {
		return res, err
	}
	res.caddyCPU = caddyAfter - caddyBefore
	res.pgCPU = max(db.cpu(pgConn, tick)-pgBefore, 0)
	return res, nil
}

func reportCluster(w io.Writer, out *clusterOutcome) {
	if out == nil {
		return
	}
	o := out.opts
	if out.note != "" {
		fmt.Fprintln(w, out.note)
		fmt.Fprintln(w)
		return
	}
	type sum struct {
		rps, cpu, pg float64
		p50, p99     time.Duration
		c1p50        time.Duration
		requests     int
	}
	sums := map[string]sum{}
	for _, r := range out.rows {
		var s sum
		var elapsed time.Duration
		var lat []time.Duration
		for _, x := range out.load[r.name] {
			s.requests += x.requests
			elapsed += x.elapsed
			s.cpu += x.caddyCPU
			s.pg += x.pgCPU
			lat = append(lat, x.latency...)
		}
		if s.requests > 0 {
			n := float64(s.requests)
			s.rps, s.cpu, s.pg = n/elapsed.Seconds(), s.cpu/n, s.pg/n
			lat = sortedCopy(lat)
			s.p50, s.p99 = quantile(lat, 0.5), quantile(lat, 0.99)
		}
		if c1 := out.c1[r.name]; len(c1) > 0 {
			s.c1p50 = quantile(sortedCopy(c1), 0.5)
		}
		sums[r.name] = s
	}
	fmt.Fprintf(w, "Two nodes on PostgreSQL: gate chat→chat, %d clients (a split row sends half of them to each node), %d rounds of %v a row; 1 client: the rows in turn, request by request\n",
		o.conc, o.rounds, o.slice)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "row\treq/s\tp50 µs\t+1 node\tp99 µs\t1 client p50 µs\t+1 node\tCaddy CPU µs/req (all nodes)\t×1 node\tPostgreSQL CPU µs/req\t\n")
	for _, r := range out.rows {
		s := sums[r.name]
		add, c1, addC1, ratioCPU := "-", "-", "-", "-"
		if r.c1 {
			c1 = us(s.c1p50)
		}
		if b, ok := sums[r.base]; ok && r.base != "" {
			add = signedUS(s.p50 - b.p50)
			if r.c1 {
				addC1 = signedUS(s.c1p50 - b.c1p50)
			}
			ratioCPU = ratio(s.cpu / b.cpu)
		}
		pg := "-"
		if r.base != "" {
			pg = fmt.Sprintf("%.1f", s.pg*1e6)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%.0f\t%s\t%s\t\n", r.name, s.rps, us(s.p50), add, us(s.p99), c1, addC1, s.cpu*1e6, ratioCPU, pg)
	}
	tw.Flush()
	fmt.Fprintln(w, "+1 node: p50 minus the single-node gate's (same lanes) in this run; Caddy CPU sums both nodes; PostgreSQL CPU is the bench database's backends (lane sessions, listeners, pools)")
	fmt.Fprintln(w)
}
