//go:build linux || darwin

package e2e_test

// The gate's refusals as the pinned clients take them (Claude Code, Codex
// CLI, Gemini CLI), with the clients' retries left at their defaults: a
// closed window, a wrong key and a model the key does not hold each end the
// run within 10 s, showing the answer
// (when the window opens, in UTC; what to fix); full lanes make the client
// wait and then succeed. README, "What a refusal looks like to a client",
// says why the refusals have the shape they have.

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// refusalTimeout is how long a refused run may take, client start included.
const refusalTimeout = 10 * time.Second

func TestClientRefusals(t *testing.T) {
	claude := clientBin(t, "claude", "@anthropic-ai/claude-code")
	codex := clientBin(t, "codex", "@openai/codex")
	gemini := clientBin(t, "gemini", "@google/gemini-cli")
	hold := newHoldUpstream(t)
	f := startClientsWith(t, holdCaddyfile(hold.addr()))

	// A key for the block after the current one: closed now, open next.
	now := time.Now().UTC()
	if now.Add(time.Minute).Truncate(8*time.Hour) != now.Truncate(8*time.Hour) {
		t.Skip("a block ends within a minute; run again")
	}
	blocks := []string{"asia", "europe", "americas"}
	cur := now.Hour() / 8
	opens := now.Truncate(8 * time.Hour).Add(8 * time.Hour)
	closedSub := f.acct.api(t, http.MethodPost, "/api/pools/agents/subscribe",
		map[string]any{"blocks": []string{blocks[(cur+1)%3]}, "quantity": 1})
	_, closedKey := f.acct.key(t, closedSub.Get("id").Str)
	wrongKey := "sk_pool_" + strings.Repeat("A", 43)

	cases := []struct {
		name, key, model string
		// What each client must print: the opening time, or the fix.
		claudeSays, codexSays, geminiSays []string
		// Codex retries any 401 five times, whatever the answer says.
		codexRequests int
	}{
		{"closed window", closedKey, clientsModel,
			[]string{"opens next at " + opens.Format(time.RFC3339) + " (UTC)"},
			[]string{"opens next at " + opens.Format(time.RFC3339) + " (UTC)"},
			// Gemini CLI retries a 429 for minutes unless the body's
			// RetryInfo says to wait longer than five: the window's does.
			[]string{"opens next at " + opens.Format(time.RFC3339) + " (UTC)"}, 2},
		{"wrong key", wrongKey, clientsModel,
			[]string{"invalid API key", "GET /api/keys lists your keys"},
			[]string{"invalid API key", "GET /api/keys lists your keys"},
			[]string{"invalid API key", "GET /api/keys lists your keys"}, 6},
		{"unknown model", f.key, "meta-llama/Llama-3.3-70B-Instruct",
			// Claude Code shows its own text for a 404 on the model.
			[]string{"issue with the selected model", "--model"},
			[]string{`model "meta-llama/Llama-3.3-70B-Instruct" is not available with this key; it holds: ` + clientsModel},
			[]string{`model "meta-llama/Llama-3.3-70B-Instruct" is not available with this key; it holds: ` + clientsModel}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name+"/claude", func(t *testing.T) {
			r := f.run(t, claude, t.TempDir(), claudeEnv(f, tc.key), "-p", "Say hello", "--model", tc.model)
			defer r.logOnFailure(t)
			checkRefusedRun(t, r, tc.claudeSays, 2)
		})
		t.Run(tc.name+"/codex", func(t *testing.T) {
			home := codexHome(t, f, tc.model)
			r := f.run(t, codex, t.TempDir(), []string{"CODEX_HOME=" + home, "TIMEBLOCK_API_KEY=" + tc.key},
				"exec", "--skip-git-repo-check", "Say hello")
			defer r.logOnFailure(t)
			checkRefusedRun(t, r, tc.codexSays, tc.codexRequests)
		})
		t.Run(tc.name+"/gemini", func(t *testing.T) {
			env, _, reports := geminiEnv(t, f, tc.key)
			r := f.run(t, gemini, t.TempDir(), env, "-p", "Say hello", "--model", tc.model)
			defer logGeminiReports(t, reports)
			defer r.logOnFailure(t)
			// Gemini CLI prints the error's message with a stack trace
			// (TerminalQuotaError for the closed window: it will not retry).
			checkRefusedRun(t, r, tc.geminiSays, 1)
		})
	}

	// Full lanes: a key of one lane in the current block, held by another
	// request. The client's first try waits out lane_wait (5 s) and gets
	// 429 with Retry-After: 1; the lane is freed once the gate has said
	// so, and the client's next try completes the task.
	laneSub := f.acct.api(t, http.MethodPost, "/api/pools/agents/subscribe",
		map[string]any{"blocks": []string{blocks[cur]}, "quantity": 1})
	_, laneKey := f.acct.key(t, laneSub.Get("id").Str)
	closes := opens
	for _, client := range []string{"claude", "codex", "gemini"} {
		t.Run("lanes full then free/"+client, func(t *testing.T) {
			release := hold.take(t, f, laneKey)
			logStart := len(f.c.Logs())
			go func() {
				defer release()
				deadline := time.Now().Add(30 * time.Second)
				for time.Now().Before(deadline) {
					for _, e := range accessEntries(f.c.Logs()[logStart:]) {
						if e.Status == http.StatusTooManyRequests && e.header("X-Should-Retry") == "" {
							return
						}
					}
					time.Sleep(50 * time.Millisecond)
				}
			}()
			var r *clientRun
			var home string
			switch client {
			case "claude":
				r = f.run(t, claude, t.TempDir(), claudeEnv(f, laneKey), "-p", "Say hello", "--model", clientsModel)
			case "gemini":
				// Its first retry waits 5 s at least (it reads the body's
				// RetryInfo, 1 s here, not Retry-After).
				env, _, _ := geminiEnv(t, f, laneKey)
				r = f.run(t, gemini, t.TempDir(), env, "-p", "Say hello", "--model", clientsModel)
			default:
				home = codexHome(t, f, clientsModel)
				r = f.run(t, codex, t.TempDir(), []string{"CODEX_HOME=" + home, "TIMEBLOCK_API_KEY=" + laneKey},
					"exec", "--skip-git-repo-check", "Say hello")
			}
			defer r.logOnFailure(t)
			if r.err != nil || !strings.Contains(r.stdout, "Simulated reply") {
				t.Fatalf("%s did not complete its task: %v\n%s", client, r.err, r.stdout)
			}
			full, admitted := 0, 0
			for _, e := range r.requests {
				if _, held := e.Request.Headers["X-Test-Hold"]; held {
					continue
				}
				switch {
				case e.Status == http.StatusTooManyRequests:
					full++
				case e.Status == http.StatusOK && e.pool() == "agents":
					admitted++
					// Where the key stands, on every admitted response.
					if e.header("X-Timeblock-Lanes") != "1" || e.header("X-Timeblock-Lanes-In-Use") != "1" ||
						e.header("X-Timeblock-Window-Closes") != closes.Format(time.RFC3339) ||
						e.header("X-Codex-Primary-Window-Minutes") != "480" ||
						e.header("X-Codex-Primary-Reset-At") != fmt.Sprint(closes.Unix()) {
						t.Errorf("%s: standing headers %v", e, e.RespHeaders)
					}
				}
			}
			if full == 0 || admitted == 0 {
				t.Errorf("%d refused for full lanes, %d admitted; want the client to have waited and then been admitted", full, admitted)
			}
			t.Logf("%s: %d refused for full lanes, then admitted, in %v", client, full, r.took.Round(time.Millisecond))
			if client == "codex" {
				checkCodexSawWindow(t, home, closes)
			}
		})
	}
}

// checkRefusedRun checks that a refused run ended in time, after few
// requests to the gate, printing what the user needs.
func checkRefusedRun(t *testing.T, r *clientRun, says []string, maxRequests int) {
	t.Helper()
	if r.took > refusalTimeout {
		t.Errorf("the run took %v, want at most %v", r.took.Round(time.Millisecond), refusalTimeout)
	}
	if r.err == nil {
		t.Errorf("the run succeeded; want it to fail with the refusal")
	}
	if n := len(r.requests); n == 0 || n > maxRequests {
		t.Errorf("%d requests reached the gate, want 1 to %d", n, maxRequests)
	}
	out := r.stdout + r.stderr
	for _, s := range says {
		if !strings.Contains(out, s) {
			t.Errorf("the output does not say %q", s)
		}
	}
	t.Logf("%s: %d requests in %v; stdout: %s; stderr: %s", r.name, len(r.requests), r.took.Round(time.Millisecond),
		lastLines(r.stdout, 1), lastLines(r.stderr, 1))
}

// lastLines is the last n non-empty lines of s, joined.
func lastLines(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines[max(len(lines)-n, 0):], " | ")
}

// claudeEnv is Claude Code's environment for key, retries at its default.
func claudeEnv(f *clientsFixture, key string) []string {
	return []string{
		"ANTHROPIC_BASE_URL=" + f.c.URL() + "/compat",
		"ANTHROPIC_API_KEY=" + key,
		"ANTHROPIC_DEFAULT_HAIKU_MODEL=" + clientsModel,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1",
	}
}

// codexHome is a CODEX_HOME whose config.toml points Codex at the fixture
// with model, retries at their defaults.
func codexHome(t *testing.T, f *clientsFixture, model string) string {
	t.Helper()
	home := filepath.Join(t.TempDir(), "codex")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`model = %q
model_provider = "timeblock"

[model_providers.timeblock]
name = "Timeblock"
base_url = "%s/v1"
env_key = "TIMEBLOCK_API_KEY"
wire_api = "responses"
`, model, f.c.URL())
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return home
}

// checkCodexSawWindow looks in Codex's session log (what /status shows,
// written by codex exec too) for the key's window from the standing
// headers: a primary limit of 480 minutes resetting when it closes.
func checkCodexSawWindow(t *testing.T, home string, closes time.Time) {
	t.Helper()
	want := fmt.Sprintf(`"resets_at":%d`, closes.Unix())
	var found []string
	_ = filepath.WalkDir(filepath.Join(home, "sessions"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".jsonl") {
			return nil
		}
		file, err := os.Open(path)
		if err != nil {
			return nil
		}
		defer file.Close()
		sc := bufio.NewScanner(file)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			if line := sc.Text(); strings.Contains(line, `"rate_limits"`) && strings.Contains(line, `"primary"`) {
				found = append(found, line)
			}
		}
		return nil
	})
	for _, line := range found {
		if strings.Contains(line, want) && strings.Contains(line, `"window_minutes":480`) {
			t.Logf("codex recorded the window: %s", line[strings.Index(line, `"rate_limits"`):])
			return
		}
	}
	t.Errorf("codex's session log has no primary rate limit of 480 minutes with %s; rate-limit lines: %q", want, found)
}

// holdCaddyfile is clientsCaddyfile (chat upstream) with requests carrying
// X-Test-Hold sent, past the gate, to the hold upstream at addr.
func holdCaddyfile(addr string) string {
	cf := strings.ReplaceAll(clientsCaddyfile, "%FORMAT%", "chat")
	const proxy = "\t\treverse_proxy 127.0.0.1:{{.Upstream}} {"
	if !strings.Contains(cf, proxy) {
		panic("clientsCaddyfile changed: no " + proxy)
	}
	return strings.Replace(cf, proxy, "\t\t@hold header X-Test-Hold 1\n\t\treverse_proxy @hold "+addr+"\n"+proxy, 1)
}

// holdUpstream answers chat completions only when told to, so that a
// request to it holds its lane.
type holdUpstream struct {
	srv     *httptest.Server
	arrived chan struct{}
	release chan chan struct{}
}

func newHoldUpstream(t *testing.T) *holdUpstream {
	h := &holdUpstream{arrived: make(chan struct{}, 1), release: make(chan chan struct{}, 1)}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		rel := <-h.release
		h.arrived <- struct{}{}
		select {
		case <-rel:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"held","object":"chat.completion","created":0,"model":"m",`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *holdUpstream) addr() string { return strings.TrimPrefix(h.srv.URL, "http://") }

// take sends a request of key that holds one of its lanes until the
// returned func is called (at the latest when the test ends).
func (h *holdUpstream) take(t *testing.T, f *clientsFixture, key string) (release func()) {
	t.Helper()
	rel := make(chan struct{})
	h.release <- rel
	done := make(chan struct{})
	go func() {
		defer close(done)
		body := `{"model":"` + clientsModel + `","max_tokens":5,"messages":[{"role":"user","content":"hold"}]}`
		req, _ := http.NewRequest(http.MethodPost, f.c.URL()+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Test-Hold", "1")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	select {
	case <-h.arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the request holding the lane did not reach the hold upstream")
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			close(rel)
			<-done
		})
	}
	t.Cleanup(release)
	return release
}
