//go:build linux || darwin

package e2e_test

// End-to-end tests with the real clients, unchanged: Claude Code, Codex CLI
// and Gemini CLI (clients_gemini_test.go), at the versions pinned in
// clients/package.json, run in print/exec mode
// against the real caddy binary with the plugin — the account API to buy a
// key, timeblock_gate and timeblock_translate in front of the simulator, once
// with an upstream that speaks chat completions and once with one that speaks
// messages. Each run streams, asks for reasoning and makes a tool round trip:
// the prompt tells the simulator which tool to call ("call tool <name> with
// <JSON>"), the client runs it on a file in its work directory, sends the
// result back, and the simulator's answer echoes it.
//
// The clients are found in clients/node_modules/.bin (`npm ci` in
// caddymodule/e2e/clients) or in $TIMEBLOCK_CLIENTS_DIR. Without them the
// tests skip, unless TIMEBLOCK_REQUIRE_CLIENTS=1 (CI sets it).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/timeblock/timeblock/caddymodule/e2e"
)

// clientsCaddyfile has the routes of Caddyfile.example: the account API, and
// /v1/*, /compat/v1/* and /gemini/* through the gate and the translator to
// the simulator. %FORMAT% is the format the upstream speaks. The access log goes
// to Caddy's output, where the tests read it back: which requests a client
// made, their status and content type, and the pool the gate admitted them
// to (X-Timeblock-Pool, set from the gate's placeholder). The key's value is
// never logged: Caddy redacts Authorization, the filter redacts x-api-key,
// x-goog-api-key and ?key= (where a Gemini client may put it), as
// Caddyfile.example's does.
const clientsCaddyfile = `{
	timeblock {
		secret {$TIMEBLOCK_SECRET}
		pool agents {
			model ` + clientsModel + `
			slots 4
			block asia 40
			block europe 40
			block americas 40
		}
	}
}

:{{.HTTP}} {
	log {
		output stderr
		format filter {
			wrap json
			request>headers>X-Api-Key replace REDACTED
			request>headers>X-Goog-Api-Key replace REDACTED
			request>uri query {
				replace key REDACTED
			}
		}
	}
	handle /api/* {
		timeblock_accounts
	}
	@inference path /v1/* /compat/v1/* /gemini/*
	handle @inference {
		timeblock_gate
		timeblock_translate %FORMAT%
		reverse_proxy 127.0.0.1:{{.Upstream}} {
			header_down X-Timeblock-Pool {timeblock.pool}
			flush_interval -1
		}
	}
}

:{{.Upstream}} {
	timeblock_simulator {
		reasoning_tokens 8
	}
}
`

// clientsModel is the pool's model, named as a real deployment would.
const clientsModel = "Qwen/Qwen3-32B"

const clientsSecret = "TIMEBLOCK_SECRET=clients-e2e-secret-0123456789"

// clientRunTimeout bounds one client run; against the instant simulator a
// run takes a few seconds.
const clientRunTimeout = 90 * time.Second

func TestClaudeCode(t *testing.T) {
	bin := clientBin(t, "claude", "@anthropic-ai/claude-code")
	for _, upstream := range []string{"chat", "messages"} {
		t.Run(upstream+" upstream", func(t *testing.T) {
			f := startClients(t, upstream)
			// x-api-key, then Authorization: Bearer.
			for _, cred := range []struct{ env, header string }{
				{"ANTHROPIC_API_KEY", "X-Api-Key"},
				{"ANTHROPIC_AUTH_TOKEN", "Authorization"},
			} {
				t.Run(cred.env, func(t *testing.T) {
					work, marker, notes := clientWorkDir(t)
					args, _ := json.Marshal(map[string]string{"file_path": notes})
					r := f.run(t, bin, work, []string{
						"ANTHROPIC_BASE_URL=" + f.c.URL() + "/compat",
						cred.env + "=" + f.key,
						// Background tasks use the small model: name one the key holds.
						"ANTHROPIC_DEFAULT_HAIKU_MODEL=" + clientsModel,
						"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
						"DISABLE_AUTOUPDATER=1",
						// Retries are left at Claude Code's default: the gate's
						// refusals end a run by themselves (clients_refusals_test.go).
					},
						"-p", "Read my notes: call tool Read with "+string(args),
						"--model", clientsModel,
						"--output-format", "stream-json", "--verbose",
						"--allowedTools", "Read",
						"--max-turns", "3",
					)
					defer r.logOnFailure(t)
					checkClaudeRun(t, r, notes, marker)
					r.checkGate(t, "/compat/v1/messages", cred.header)
				})
			}
		})
	}
}

// checkClaudeRun checks Claude Code's stream-json output: the tool call the
// prompt asked for, its result, a thinking block, and the final answer.
func checkClaudeRun(t *testing.T, r *clientRun, notes, marker string) {
	t.Helper()
	if r.err != nil {
		t.Errorf("claude exited with %v", r.err)
	}
	var toolUse, toolResult, thinking, result gjson.Result
	for _, ev := range r.events {
		switch ev.Get("type").Str {
		case "assistant":
			ev.Get("message.content").ForEach(func(_, b gjson.Result) bool {
				switch b.Get("type").Str {
				case "tool_use":
					toolUse = b
				case "thinking", "redacted_thinking":
					thinking = b
				}
				return true
			})
		case "user":
			ev.Get("message.content").ForEach(func(_, b gjson.Result) bool {
				if b.Get("type").Str == "tool_result" {
					toolResult = b
				}
				return true
			})
		case "result":
			result = ev
		}
	}
	if toolUse.Get("name").Str != "Read" || toolUse.Get("input.file_path").Str != notes {
		t.Errorf("no Read call on %s; the last tool call: %s", notes, toolUse.Raw)
	}
	if !strings.Contains(toolResult.Get("content").String(), marker) || toolResult.Get("is_error").Bool() {
		t.Errorf("the tool result does not hold the file's content %q: %s", marker, toolResult.Raw)
	}
	if !thinking.Exists() || thinking.Get("thinking").Str == "" && thinking.Get("signature").Str == "" && thinking.Get("data").Str == "" {
		t.Errorf("no thinking block in the output (reasoning was asked for); the last one: %s", thinking.Raw)
	} else {
		t.Logf("thinking block: %s", thinking.Raw)
	}
	// The simulator's answer echoes the tool result it was sent.
	answer := result.Get("result").Str
	if result.Get("subtype").Str != "success" || result.Get("is_error").Bool() ||
		!strings.HasPrefix(answer, "Simulated reply ") || !strings.Contains(answer, marker) {
		t.Errorf("the final result is not the simulator's answer echoing %q: %s", marker, result.Raw)
	}
}

func TestCodex(t *testing.T) {
	bin := clientBin(t, "codex", "@openai/codex")
	for _, upstream := range []string{"chat", "messages"} {
		t.Run(upstream+" upstream", func(t *testing.T) {
			f := startClients(t, upstream)
			work, marker, _ := clientWorkDir(t)
			codexHome := filepath.Join(t.TempDir(), "codex")
			if err := os.Mkdir(codexHome, 0o700); err != nil {
				t.Fatal(err)
			}
			config := fmt.Sprintf(`model = %q
model_provider = "timeblock"
model_reasoning_effort = "high"

[model_providers.timeblock]
name = "Timeblock"
base_url = "%s/v1"
env_key = "TIMEBLOCK_API_KEY"
wire_api = "responses"
`, clientsModel, f.c.URL())
			if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(config), 0o600); err != nil {
				t.Fatal(err)
			}
			r := f.run(t, bin, work, []string{
				"CODEX_HOME=" + codexHome,
				"TIMEBLOCK_API_KEY=" + f.key,
			},
				"exec", "--skip-git-repo-check", "--json",
				`Show me my notes: call tool exec_command with {"cmd": "cat notes.txt"}`,
			)
			defer r.logOnFailure(t)
			checkCodexRun(t, r, marker)
			r.checkGate(t, "/v1/responses", "Authorization")
		})
	}
}

// checkCodexRun checks codex exec's JSON events: the command the prompt
// asked for and its output, a reasoning item, and the final answer.
func checkCodexRun(t *testing.T, r *clientRun, marker string) {
	t.Helper()
	if r.err != nil {
		t.Errorf("codex exited with %v", r.err)
	}
	var command, reasoning, answer gjson.Result
	var completed bool
	for _, ev := range r.events {
		switch ev.Get("type").Str {
		case "item.completed":
			switch item := ev.Get("item"); item.Get("type").Str {
			case "command_execution":
				command = item
			case "reasoning":
				reasoning = item
			case "agent_message":
				answer = item
			}
		case "turn.completed":
			completed = true
		case "turn.failed", "error":
			t.Errorf("codex reported %s", ev.Raw)
		}
	}
	if !strings.Contains(command.Get("command").Str, "cat notes.txt") || command.Get("exit_code").Int() != 0 ||
		!strings.Contains(command.Get("aggregated_output").Str, marker) {
		t.Errorf("no `cat notes.txt` that printed %q; the last command: %s", marker, command.Raw)
	}
	if reasoning.Get("text").Str == "" {
		t.Errorf("no reasoning item with text (reasoning was asked for); the last one: %s", reasoning.Raw)
	} else {
		t.Logf("reasoning item: %s", reasoning.Raw)
	}
	if text := answer.Get("text").Str; !strings.HasPrefix(text, "Simulated reply ") || !strings.Contains(text, marker) {
		t.Errorf("the final message is not the simulator's answer echoing %q: %s", marker, answer.Raw)
	}
	if !completed {
		t.Errorf("no turn.completed event")
	}
}

// clientBin returns the path of a pinned client, skipping the test (or
// failing it when TIMEBLOCK_REQUIRE_CLIENTS=1) when it is not installed, and
// failing it when the installed version is not the pinned one.
func clientBin(t *testing.T, name, pkg string) string {
	t.Helper()
	dir := os.Getenv("TIMEBLOCK_CLIENTS_DIR")
	if dir == "" {
		dir = filepath.Join("clients", "node_modules", ".bin")
	}
	bin, err := filepath.Abs(filepath.Join(dir, name))
	if err == nil {
		_, err = os.Stat(bin)
	}
	if err != nil {
		msg := fmt.Sprintf("%s is not installed (%v): run `npm ci` in caddymodule/e2e/clients (Node.js and npm needed), "+
			"or set TIMEBLOCK_CLIENTS_DIR to a node_modules/.bin directory holding claude, codex and gemini", name, err)
		if os.Getenv("TIMEBLOCK_REQUIRE_CLIENTS") == "1" {
			t.Fatal(msg + " (TIMEBLOCK_REQUIRE_CLIENTS=1)")
		}
		t.Skip(msg)
	}

	var pins struct{ Dependencies map[string]string }
	if b, err := os.ReadFile(filepath.Join("clients", "package.json")); err != nil {
		t.Fatal(err)
	} else if err := json.Unmarshal(b, &pins); err != nil {
		t.Fatalf("clients/package.json: %v", err)
	}
	want := pins.Dependencies[pkg]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--version")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s --version: %v\n%s", bin, err, out)
	}
	// "2.1.328 (Claude Code)", "codex-cli 0.169.0", "0.61.0" (gemini)
	if !strings.Contains(" "+strings.TrimSpace(string(out))+" ", " "+want+" ") {
		t.Fatalf("%s --version says %q; clients/package.json pins %s %s: run `npm ci` in caddymodule/e2e/clients",
			bin, strings.TrimSpace(string(out)), pkg, want)
	}
	return bin
}

// clientWorkDir makes a client's work directory with a notes.txt holding a
// marker that appears nowhere else: seen in an answer, it came through the
// tool.
func clientWorkDir(t *testing.T) (dir, marker, notes string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "work")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	marker = fmt.Sprintf("marker-%x", time.Now().UnixNano())
	notes = filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notes, []byte(marker+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, marker, notes
}

// clientsFixture is a Caddy with a key on sale, and the proxy that keeps
// clients off the network.
type clientsFixture struct {
	c       *e2e.Caddy
	acct    *account
	key     string
	offline *offlineProxy
}

func startClients(t *testing.T, upstream string) *clientsFixture {
	t.Helper()
	return startClientsWith(t, strings.ReplaceAll(clientsCaddyfile, "%FORMAT%", upstream))
}

// startClientsWith is startClients with a Caddyfile of the test's own.
func startClientsWith(t *testing.T, caddyfile string) *clientsFixture {
	t.Helper()
	c := e2e.Start(t, caddyfile, e2e.WithEnv(clientsSecret))
	a := newAccount(t, c)
	sub := a.api(t, http.MethodPost, "/api/pools/agents/subscribe",
		map[string]any{"blocks": []string{"asia", "europe", "americas"}, "quantity": 2})
	_, key := a.key(t, sub.Get("id").Str)
	if key == "" {
		t.Fatalf("no key for subscription %s", sub.Raw)
	}
	return &clientsFixture{c: c, acct: a, key: key, offline: newOfflineProxy(t)}
}

// clientRun is what one client run did.
type clientRun struct {
	name           string
	stdout, stderr string
	err            error
	took           time.Duration
	events         []gjson.Result // stdout's JSON lines
	requests       []accessEntry  // inference requests Caddy logged meanwhile
	admitted       int            // requests the gate admitted meanwhile
	outside        []string       // hosts the client tried to reach beyond loopback
}

// run runs a client in dir with a private HOME, the given environment and
// nothing else of the test's (only PATH, for node and the tools it runs), no
// network beyond loopback, and a timeout.
func (f *clientsFixture) run(t *testing.T, bin, dir string, env []string, args ...string) *clientRun {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	proxy := f.offline.URL()
	cmdEnv := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"XDG_DATA_HOME=" + filepath.Join(home, ".local", "share"),
		"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
		"LANG=C.UTF-8",
		"TERM=dumb",
		"NO_COLOR=1",
		// Anything but loopback goes to a proxy that refuses it.
		"HTTP_PROXY=" + proxy, "HTTPS_PROXY=" + proxy, "ALL_PROXY=" + proxy,
		"http_proxy=" + proxy, "https_proxy=" + proxy, "all_proxy=" + proxy,
		"NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost",
	}
	r := &clientRun{name: filepath.Base(bin)}
	logStart := len(f.c.Logs())
	admittedBefore := f.admissions(t)
	outsideStart := f.offline.count()

	ctx, cancel := context.WithTimeout(context.Background(), clientRunTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = append(cmdEnv, env...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// Its own process group, so that the client's children (codex's native
	// binary under node, the shells it runs) go with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	r.err = cmd.Run()
	r.took = time.Since(start)
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // leftovers, if any
	}
	if ctx.Err() != nil {
		r.err = fmt.Errorf("%v (killed after %v)", r.err, clientRunTimeout)
	}
	r.stdout, r.stderr = stdout.String(), stderr.String()
	for _, line := range strings.Split(r.stdout, "\n") {
		if line = strings.TrimSpace(line); gjson.Valid(line) && strings.HasPrefix(line, "{") {
			r.events = append(r.events, gjson.Parse(line))
		}
	}

	// The access log line of the last request may trail the response the
	// client read; wait until every admitted request is logged.
	r.admitted = f.admissions(t) - admittedBefore
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		r.requests = accessEntries(f.c.Logs()[logStart:])
		admittedLogged := 0
		for _, e := range r.requests {
			if e.pool() != "" {
				admittedLogged++
			}
		}
		if admittedLogged >= r.admitted || time.Now().After(deadline) {
			break
		}
	}
	r.outside = f.offline.since(outsideStart)
	t.Logf("%s ran in %v: %d inference requests, %d admitted by the gate", r.name, r.took.Round(time.Millisecond), len(r.requests), r.admitted)
	if len(r.outside) > 0 {
		t.Logf("%s tried to reach beyond loopback (refused): %s", r.name, strings.Join(r.outside, ", "))
	}
	return r
}

// checkGate checks that the run's inference requests all went through the
// gate and succeeded, that at least two (the tool call and the answer) were
// streamed from path, and that the key came in header.
func (r *clientRun) checkGate(t *testing.T, path, header string) {
	t.Helper()
	streamed := 0
	for _, e := range r.requests {
		if e.Status != http.StatusOK || e.pool() != "agents" {
			t.Errorf("%s: status %d, admitted to pool %q; want 200 through the gate", e, e.Status, e.pool())
			continue
		}
		if e.Request.Method == http.MethodPost && strings.SplitN(e.Request.URI, "?", 2)[0] == path &&
			strings.HasPrefix(e.header("Content-Type"), "text/event-stream") {
			streamed++
		}
		if _, ok := e.Request.Headers[header]; !ok {
			t.Errorf("%s: the key did not come in %s", e, header)
		}
	}
	if streamed < 2 {
		t.Errorf("%d streamed POST %s requests went through the gate, want at least 2 (the tool call and the answer)", streamed, path)
	}
	if r.admitted < streamed {
		t.Errorf("the gate counted %d admissions for %d admitted requests in the access log", r.admitted, streamed)
	}
}

// logOnFailure puts what the client printed and the requests it made in the
// test log if the test failed.
func (r *clientRun) logOnFailure(t *testing.T) {
	if !t.Failed() {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %v after %v\n--- requests ---\n", r.name, r.err, r.took.Round(time.Millisecond))
	for _, e := range r.requests {
		fmt.Fprintf(&b, "%s → %d %s, pool %q\n", e, e.Status, e.header("Content-Type"), e.pool())
	}
	fmt.Fprintf(&b, "--- stdout ---\n%s\n--- stderr ---\n%s", r.stdout, r.stderr)
	t.Log(b.String())
}

// admissions reads timeblock_gate_admissions_total for the pool from the
// admin API's metrics.
func (f *clientsFixture) admissions(t *testing.T) int {
	t.Helper()
	resp, err := http.Get(f.c.AdminURL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	const series = `timeblock_gate_admissions_total{pool="agents"} `
	for _, line := range strings.Split(b.String(), "\n") {
		if v, ok := strings.CutPrefix(line, series); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("metrics: %q: %v", line, err)
			}
			return int(n)
		}
	}
	return 0 // nothing admitted yet
}

// accessEntry is one line of Caddy's access log.
type accessEntry struct {
	Logger  string `json:"logger"`
	Request struct {
		Method string `json:"method"`
		URI    string `json:"uri"`
		// Redacted credentials are strings, other headers arrays.
		Headers map[string]json.RawMessage `json:"headers"`
	} `json:"request"`
	Status      int                 `json:"status"`
	RespHeaders map[string][]string `json:"resp_headers"`
}

func (e accessEntry) String() string { return e.Request.Method + " " + e.Request.URI }

func (e accessEntry) header(name string) string {
	if v := e.RespHeaders[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func (e accessEntry) pool() string { return e.header("X-Timeblock-Pool") }

// accessEntries returns the access log entries of inference requests in
// Caddy's output.
func accessEntries(logs string) []accessEntry {
	var entries []accessEntry
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, `"http.log.access`) {
			continue
		}
		var e accessEntry
		if json.Unmarshal([]byte(line), &e) != nil || !strings.HasPrefix(e.Logger, "http.log.access") {
			continue
		}
		if strings.HasPrefix(e.Request.URI, "/v1/") || strings.HasPrefix(e.Request.URI, "/compat/v1/") ||
			strings.HasPrefix(e.Request.URI, "/gemini/") {
			entries = append(entries, e)
		}
	}
	return entries
}

// offlineProxy is the HTTP proxy the clients are given: it refuses every
// request and CONNECT, and records where they were going.
type offlineProxy struct {
	srv   *httptest.Server
	mu    sync.Mutex
	hosts []string
}

func newOfflineProxy(t *testing.T) *offlineProxy {
	p := &offlineProxy{}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if r.URL.Host != "" {
			host = r.URL.Host
		}
		p.mu.Lock()
		p.hosts = append(p.hosts, host)
		p.mu.Unlock()
		http.Error(w, "no network in this test", http.StatusForbidden)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *offlineProxy) URL() string { return p.srv.URL }

func (p *offlineProxy) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.hosts)
}

// since returns the distinct hosts recorded after the first n.
func (p *offlineProxy) since(n int) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := map[string]bool{}
	var hosts []string
	for _, h := range p.hosts[n:] {
		if !seen[h] {
			seen[h] = true
			hosts = append(hosts, h)
		}
	}
	return hosts
}
