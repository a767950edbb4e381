package main

// The Caddy under test: one process, built from ./cmd/caddy, serving the
// bare reverse_proxy, the gate with translation, the gate alone, and a
// reverse_proxy that reads the whole body before forwarding it side by side
// on loopback ports, and the
// readings the benchmark takes from it (CPU time from /proc, allocations and
// heap from the admin endpoint's /metrics).

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// buildCaddy builds the caddy binary of this module into dir.
func buildCaddy(dir string) (string, error) {
	bin := filepath.Join(dir, "caddy")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/timeblock/timeblock/cmd/caddy")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building caddy (run from the repository): %v\n%s", err, out)
	}
	return bin, nil
}

type caddyProc struct {
	cmd               *exec.Cmd
	done              chan struct{}
	log               *os.File
	proxyURL, gateURL string
	gateOnlyURL       string // the gate without timeblock_translate
	twinURL           string // a second bare proxy, for the noise between two identical sites
	bufferedURL       string // a bare proxy that reads the whole body first, as the gate must
	adminURL          string
	pid               int
	admin             *http.Client
	clockTick         float64
	scrapeMallocs     float64 // allocations one /metrics scrape costs Caddy
	scrapeBytes       float64
}

// caddyfile is the configuration under test. The sites route the inference
// paths the same way and proxy with the same transport settings, so the only
// difference between them is timeblock_gate and timeblock_translate.
const caddyfile = `{
	admin 127.0.0.1:{ADMIN}
	auto_https off
	persist_config off
	default_bind 127.0.0.1
	timeblock {
		{STORE}
		secret loadbench-secret-0123456789abcdef
		pool bench {
			model ` + benchModel + `
			slots 256
			block asia 10
			block europe 10
			block americas 10
		}
{MEMPOOL}	}
}

(transport) {
	transport http {
		keepalive 2m
		keepalive_idle_conns 1024
		keepalive_idle_conns_per_host 1024
	}
	flush_interval -1
}

(upstream) {
	reverse_proxy {UPSTREAM} {
		import transport
	}
}

:{PROXY} {
	@inference path /v1/chat/completions /compat/v1/messages /v1/responses
	handle @inference {
		import upstream
	}
}

# The same bare proxy again: what it differs by from the first is noise.
:{TWIN} {
	@inference path /v1/chat/completions /compat/v1/messages /v1/responses
	handle @inference {
		import upstream
	}
}

:{GATE} {
	handle /api/* {
		timeblock_accounts
	}
	@inference path /v1/chat/completions /compat/v1/messages /v1/responses /gemini/*
	handle @inference {
		timeblock_gate {
			lane_wait 30s
		}
		timeblock_translate chat
		import upstream
	}
}

# A bare proxy that reads the whole request body before it sends any of it
# on (store and forward), as the gate must to check it: what that alone
# costs, next to the bare proxy, which streams the body through.
:{BUFFERED} {
	@inference path /v1/chat/completions /compat/v1/messages /v1/responses
	handle @inference {
		reverse_proxy {UPSTREAM} {
			request_buffers 32MiB
			import transport
		}
	}
}

# The gate without translation, to tell the two apart.
:{GATEONLY} {
	@inference path /v1/chat/completions /compat/v1/messages /v1/responses
	handle @inference {
		timeblock_gate {
			lane_wait 30s
		}
		import upstream
	}
}
`

const memPool = `		pool mem {
			model ` + memModel + `
			slots {MEMSLOTS}
			block asia 10
			block europe 10
			block americas 10
		}
`

const memModel = "bench-mem-model"

// startCaddy writes the Caddyfile into dir and runs bin on free ports.
// memSlots > 0 adds the pool of the slow-stream check.
func startCaddy(bin, dir, upstreamAddr string, memSlots int) (*caddyProc, error) {
	return startCaddyStore(bin, dir, upstreamAddr, memSlots, "store embedded "+filepath.Join(dir, "timeblock.db"))
}

// startCaddyStore is startCaddy with another store line (the two-node
// phase's "store postgres <dsn>").
func startCaddyStore(bin, dir, upstreamAddr string, memSlots int, store string) (*caddyProc, error) {
	ports, err := freePorts(6)
	if err != nil {
		return nil, err
	}
	mp := ""
	if memSlots > 0 {
		mp = strings.ReplaceAll(memPool, "{MEMSLOTS}", strconv.Itoa(memSlots))
	}
	cfg := strings.NewReplacer(
		"{ADMIN}", strconv.Itoa(ports[0]),
		"{PROXY}", strconv.Itoa(ports[1]),
		"{GATE}", strconv.Itoa(ports[2]),
		"{GATEONLY}", strconv.Itoa(ports[3]),
		"{TWIN}", strconv.Itoa(ports[4]),
		"{BUFFERED}", strconv.Itoa(ports[5]),
		"{STORE}", store,
		"{UPSTREAM}", upstreamAddr,
		"{MEMPOOL}", mp,
	).Replace(caddyfile)
	cfgPath := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "caddy.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "run", "--config", cfgPath, "--adapter", "caddyfile")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_CONFIG_HOME="+dir, "XDG_DATA_HOME="+dir)
	cmd.Stdout, cmd.Stderr = logf, logf
	setSysProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting caddy: %w", err)
	}
	c := &caddyProc{
		cmd:         cmd,
		done:        make(chan struct{}),
		log:         logf,
		adminURL:    "http://127.0.0.1:" + strconv.Itoa(ports[0]),
		proxyURL:    "http://127.0.0.1:" + strconv.Itoa(ports[1]),
		gateURL:     "http://127.0.0.1:" + strconv.Itoa(ports[2]),
		gateOnlyURL: "http://127.0.0.1:" + strconv.Itoa(ports[3]),
		twinURL:     "http://127.0.0.1:" + strconv.Itoa(ports[4]),
		bufferedURL: "http://127.0.0.1:" + strconv.Itoa(ports[5]),
		pid:         cmd.Process.Pid,
		admin:       &http.Client{Timeout: 60 * time.Second},
		clockTick:   100, // USER_HZ: 100 on every Linux this runs on
	}
	go func() { cmd.Wait(); close(c.done) }()
	deadline := time.Now().Add(30 * time.Second)
	for _, addr := range []string{c.gateURL, c.gateOnlyURL, c.proxyURL, c.twinURL, c.bufferedURL, c.adminURL} {
		for {
			select {
			case <-c.done:
				return nil, fmt.Errorf("caddy exited at start:\n%s", c.logTail())
			default:
			}
			conn, err := net.DialTimeout("tcp", strings.TrimPrefix(addr, "http://"), 200*time.Millisecond)
			if err == nil {
				conn.Close()
				break
			}
			if time.Now().After(deadline) {
				c.stop()
				return nil, fmt.Errorf("caddy did not answer on %s within 30s:\n%s", addr, c.logTail())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return c, nil
}

// stop asks Caddy to stop and kills it after 10s.
func (c *caddyProc) stop() {
	_ = c.cmd.Process.Signal(os.Interrupt)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
	c.log.Close()
}

func (c *caddyProc) logTail() string {
	b, _ := os.ReadFile(c.log.Name())
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// cpuSeconds is the CPU time (user + system, all threads) Caddy has used.
func (c *caddyProc) cpuSeconds() (float64, error) {
	return procCPU(c.pid, c.clockTick)
}

// procCPU reads utime + stime of a process from /proc/<pid>/stat.
func procCPU(pid int, tick float64) (float64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; fields count from its ")".
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("unexpected /proc stat format")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("unexpected /proc stat format")
	}
	ut, err1 := strconv.ParseFloat(f[11], 64) // field 14
	st, err2 := strconv.ParseFloat(f[12], 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, errors.New("unexpected /proc stat format")
	}
	return (ut + st) / tick, nil
}

// machineCPU reads /proc/stat: the CPU time all processes have used
// (user, nice, system, irq, softirq, summed over the CPUs) and the time the
// hypervisor gave the CPUs to someone else (steal).
func machineCPU(tick float64) (busy, steal float64, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, errors.New("unexpected /proc/stat format")
	}
	var v [8]float64
	for i := range v {
		if v[i], err = strconv.ParseFloat(f[i+1], 64); err != nil {
			return 0, 0, err
		}
	}
	// user nice system idle iowait irq softirq steal
	return (v[0] + v[1] + v[2] + v[5] + v[6]) / tick, v[7] / tick, nil
}

// rssBytes is the resident set size from /proc/<pid>/status.
func (c *caddyProc) rssBytes() float64 {
	f, err := os.Open("/proc/" + strconv.Itoa(c.pid) + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb * 1024
		}
	}
	return 0
}

// metrics reads the named series (no labels) from Caddy's /metrics.
func (c *caddyProc) metrics(names ...string) (map[string]float64, error) {
	resp, err := c.admin.Get(c.adminURL + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/metrics: %s", resp.Status)
	}
	out := make(map[string]float64, len(names))
	for line := range bytes.Lines(b) {
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		for _, n := range names {
			if bytes.HasPrefix(line, []byte(n+" ")) {
				v, err := strconv.ParseFloat(strings.TrimSpace(string(line[len(n)+1:])), 64)
				if err == nil {
					out[n] = v
				}
			}
		}
	}
	for _, n := range names {
		if _, ok := out[n]; !ok {
			return nil, fmt.Errorf("/metrics has no %s", n)
		}
	}
	return out, nil
}

// reading is what one snapshot of the Caddy process says.
type reading struct {
	cpu            float64 // seconds
	mallocs, bytes float64 // cumulative
	reads, writes  float64 // read and write system calls, cumulative (0 where /proc has no io)
}

func (c *caddyProc) read() (reading, error) {
	m, err := c.metrics("go_memstats_mallocs_total", "go_memstats_alloc_bytes_total")
	if err != nil {
		return reading{}, err
	}
	cpu, err := c.cpuSeconds()
	if err != nil {
		return reading{}, err
	}
	r := reading{cpu: cpu, mallocs: m["go_memstats_mallocs_total"], bytes: m["go_memstats_alloc_bytes_total"]}
	r.reads, r.writes = procSyscalls(c.pid)
	return r, nil
}

// procSyscalls reads how many read and write system calls a process has
// made (/proc/<pid>/io), sockets included: a write on loopback costs
// several µs of CPU, so a variant's count per request explains much of
// its cost. It returns zeros where the file cannot be read.
func procSyscalls(pid int) (reads, writes float64) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/io")
	if err != nil {
		return 0, 0
	}
	for line := range strings.Lines(string(b)) {
		name, v, ok := strings.Cut(strings.TrimSpace(line), ": ")
		if !ok {
			continue
		}
		n, _ := strconv.ParseFloat(v, 64)
		switch name {
		case "syscr":
			reads = n
		case "syscw":
			writes = n
		}
	}
	return reads, writes
}

// calibrate measures what a /metrics scrape itself allocates in Caddy, so
// that it can be taken out of the per-request figures.
func (c *caddyProc) calibrate() error {
	first, err := c.read()
	if err != nil {
		return err
	}
	const n = 5
	last := first
	for range n {
		if last, err = c.read(); err != nil {
			return err
		}
	}
	c.scrapeMallocs = (last.mallocs - first.mallocs) / n
	c.scrapeBytes = (last.bytes - first.bytes) / n
	return nil
}

// gc makes Caddy collect garbage (the heap profile endpoint with gc=1), so
// that the heap figures read next are live memory. It collects twice: what
// sync.Pools hold survives the first collection.
func (c *caddyProc) gc() error {
	for range 2 {
		resp, err := c.admin.Get(c.adminURL + "/debug/pprof/heap?gc=1")
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return nil
}

// profile saves a pprof profile of Caddy (kind "profile" for CPU, "allocs"
// for allocations, "heap") taken over d (0: a snapshot) into path.
func (c *caddyProc) profile(ctx context.Context, kind string, d time.Duration, path string) error {
	url := fmt.Sprintf("%s/debug/pprof/%s", c.adminURL, kind)
	if d > 0 {
		url += fmt.Sprintf("?seconds=%d", int(d.Seconds()))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.admin.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s: %s: %s", url, resp.Status, b)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// freePorts asks the kernel for n distinct free loopback ports.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
