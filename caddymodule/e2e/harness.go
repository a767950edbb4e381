// Package e2e runs the real caddy binary, built once per test process from
// ./cmd/caddy, as a subprocess on free loopback ports, for end-to-end tests
// that go through the Caddyfile adapter, the module registry and real HTTP.
//
// A test package using it calls Main from TestMain, so the built binary is
// removed afterwards:
//
//	func TestMain(m *testing.M) { e2e.Main(m) }
//
//	func TestChat(t *testing.T) {
//		c := e2e.Start(t, `
//	:{{.HTTP}} {
//		timeblock_simulator
//	}`)
//		client := c.OpenAIClient("sk-test")
//		…
//	}
package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/template"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	antoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	oaioption "github.com/openai/openai-go/v3/option"
)

// Ports are the loopback ports of one Caddy instance. The Caddyfile given to
// Start and Reload is a text/template over Ports and Dir: {{.HTTP}},
// {{.HTTPS}}, {{.Upstream}}, {{.Admin}}, {{.Dir}}.
type Ports struct {
	HTTP     int // Caddy's http_port; the harness waits until it answers and Caddy has started
	HTTPS    int // Caddy's https_port, so nothing tries 443
	Upstream int // free for a second site, e.g. a simulated model server
	Admin    int // the admin API
}

// Caddy is one running caddy process.
type Caddy struct {
	Ports
	// Dir is the instance's private directory: HOME, XDG_CONFIG_HOME and
	// XDG_DATA_HOME (hence Caddy's data dir, Dir/data/caddy) live under it,
	// and it survives Restart.
	Dir string

	t          testing.TB
	opts       options
	configPath string
	caddyfile  string // the rendered config now running
	logs       logBuffer

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// Option configures Start.
type Option func(*options)

type options struct {
	env          []string
	startTimeout time.Duration
}

// WithEnv adds KEY=value pairs to the environment of caddy and of the
// commands that reload it ({$KEY} in a Caddyfile is read at adapt time).
func WithEnv(kv ...string) Option {
	return func(o *options) { o.env = append(o.env, kv...) }
}

// WithStartTimeout changes how long Start and Restart wait for the HTTP port
// to answer (default 30s).
func WithStartTimeout(d time.Duration) Option {
	return func(o *options) { o.startTimeout = d }
}

// Start runs caddy with the given Caddyfile template and waits until it has
// started (it logs "serving initial configuration") and its HTTP port
// answers. The harness adds these global options at the top of
// the Caddyfile's global options block (or adds the block): admin on
// 127.0.0.1:{{.Admin}}, http_port, https_port, auto_https off,
// persist_config off, default_bind 127.0.0.1. Options the Caddyfile sets
// itself come later and win. Caddy stops when the test ends; its log goes
// to the test log if the test failed.
func Start(t testing.TB, caddyfile string, opts ...Option) *Caddy {
	t.Helper()
	bin := Binary(t)
	c := &Caddy{t: t, Dir: t.TempDir(), opts: options{startTimeout: 30 * time.Second}}
	for _, o := range opts {
		o(&c.opts)
	}
	ports, err := freePorts(4)
	if err != nil {
		t.Fatalf("e2e: %v", err)
	}
	c.Ports = Ports{HTTP: ports[0], HTTPS: ports[1], Upstream: ports[2], Admin: ports[3]}
	for _, d := range []string{"home", "config", "data"} {
		if err := os.Mkdir(filepath.Join(c.Dir, d), 0o700); err != nil {
			t.Fatalf("e2e: %v", err)
		}
	}
	c.configPath = filepath.Join(c.Dir, "Caddyfile")
	if c.caddyfile, err = c.render(caddyfile); err != nil {
		t.Fatalf("e2e: %v", err)
	}
	if err := os.WriteFile(c.configPath, []byte(c.caddyfile), 0o600); err != nil {
		t.Fatalf("e2e: %v", err)
	}
	t.Cleanup(func() {
		c.Stop()
		if t.Failed() {
			t.Logf("caddy log:\n%s", c.Logs())
		}
	})
	if err := c.run(bin); err != nil {
		t.Fatalf("e2e: %v", err)
	}
	return c
}

// URL is the base URL of the HTTP port, without a trailing slash.
func (c *Caddy) URL() string { return "http://127.0.0.1:" + strconv.Itoa(c.HTTP) }

// UpstreamURL is the base URL of the Upstream port.
func (c *Caddy) UpstreamURL() string { return "http://127.0.0.1:" + strconv.Itoa(c.Upstream) }

// AdminURL is the base URL of the admin API.
func (c *Caddy) AdminURL() string { return "http://127.0.0.1:" + strconv.Itoa(c.Admin) }

// Logs returns what caddy has written to stdout and stderr so far, across
// restarts.
func (c *Caddy) Logs() string { return c.logs.String() }

// Reload renders caddyfile with the same ports and applies it with
// `caddy reload`, which returns once the new config runs. On failure the
// previous config stays in place, for Caddy and for Restart, and the error
// carries caddy's output.
func (c *Caddy) Reload(caddyfile string) error {
	c.t.Helper()
	rendered, err := c.render(caddyfile)
	if err != nil {
		return err
	}
	if err := os.WriteFile(c.configPath, []byte(rendered), 0o600); err != nil {
		return err
	}
	cmd := exec.Command(Binary(c.t), "reload", "--config", c.configPath, "--adapter", "caddyfile",
		"--address", "127.0.0.1:"+strconv.Itoa(c.Admin))
	cmd.Env = c.env()
	cmd.Dir = c.Dir
	if out, err := cmd.CombinedOutput(); err != nil {
		if werr := os.WriteFile(c.configPath, []byte(c.caddyfile), 0o600); werr != nil {
			c.t.Errorf("e2e: restoring %s: %v", c.configPath, werr)
		}
		return fmt.Errorf("caddy reload: %v\n%s--- Caddyfile ---\n%s", err, plainLog(out), numbered(rendered))
	}
	c.caddyfile = rendered
	return nil
}

// Restart stops caddy and starts it again with the current config, ports
// and data directory, as an operator's restart would.
func (c *Caddy) Restart() {
	c.t.Helper()
	c.Stop()
	c.logs.WriteString("--- restart ---\n")
	if err := c.run(Binary(c.t)); err != nil {
		c.t.Fatalf("e2e: %v", err)
	}
}

// Stop stops caddy: SIGINT for a graceful stop, then SIGKILL after 10s.
// It is safe to call more than once.
func (c *Caddy) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil {
		return
	}
	_ = c.cmd.Process.Signal(os.Interrupt)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		c.t.Logf("e2e: caddy did not stop within 10s of SIGINT; killing it")
		_ = c.cmd.Process.Kill()
		<-c.done
	}
	c.cmd = nil
}

// Kill ends caddy with SIGKILL, as a crash or an OOM kill would: no
// shutdown code runs. Start it again with Start (the same ports, config and
// data directory). It is safe to call when caddy is not running.
func (c *Caddy) Kill() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil {
		return
	}
	_ = c.cmd.Process.Kill()
	<-c.done
	c.cmd = nil
	c.logs.WriteString("--- killed (SIGKILL) ---\n")
}

// Start runs caddy again after Stop or Kill, with the current config, ports
// and data directory.
func (c *Caddy) Start() {
	c.t.Helper()
	c.logs.WriteString("--- start ---\n")
	if err := c.run(Binary(c.t)); err != nil {
		c.t.Fatalf("e2e: %v", err)
	}
}

// CLI runs the caddy binary with args, in a private home, and returns its
// combined output, with Caddy's JSON log lines shown as "<level>: <msg>",
// and its error. For commands such as adapt, validate and list-modules.
func CLI(t testing.TB, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(Binary(t), args...)
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home, "XDG_DATA_HOME="+home)
	cmd.Dir = home
	out, err := cmd.CombinedOutput()
	return plainLog(out), err
}

// OpenAIClient returns an openai-go client for the chat-completions endpoint
// on the HTTP port (base URL {URL}/v1/, to which the SDK appends
// chat/completions). Retries are off, so a test sees the first answer.
func (c *Caddy) OpenAIClient(apiKey string, opts ...oaioption.RequestOption) openai.Client {
	return openai.NewClient(append([]oaioption.RequestOption{
		oaioption.WithBaseURL(c.URL() + "/v1/"),
		oaioption.WithAPIKey(apiKey),
		oaioption.WithMaxRetries(0),
	}, opts...)...)
}

// AnthropicClient returns an anthropic-sdk-go client for the messages
// endpoint on the HTTP port (base URL {URL}/compat/, to which the SDK
// appends v1/messages). Ambient ANTHROPIC_* variables are ignored and
// retries are off.
func (c *Caddy) AnthropicClient(apiKey string, opts ...antoption.RequestOption) anthropic.Client {
	return anthropic.NewClient(append([]antoption.RequestOption{
		antoption.WithoutEnvironmentDefaults(),
		antoption.WithBaseURL(c.URL() + "/compat/"),
		antoption.WithAPIKey(apiKey),
		antoption.WithMaxRetries(0),
	}, opts...)...)
}

// run starts the process and waits for the HTTP port.
func (c *Caddy) run(bin string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	cmd := exec.Command(bin, "run", "--config", c.configPath, "--adapter", "caddyfile")
	cmd.Env = c.env()
	cmd.Dir = c.Dir
	cmd.Stdout = &c.logs
	cmd.Stderr = &c.logs
	logFrom := len(c.logs.String()) // a restart's log follows the last run's
	setSysProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting caddy: %v", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	c.cmd, c.done = cmd, done

	addr := "127.0.0.1:" + strconv.Itoa(c.HTTP)
	deadline := time.Now().Add(c.opts.startTimeout)
	for {
		select {
		case <-done:
			c.cmd = nil
			return fmt.Errorf("caddy exited at start (%v)\n--- caddy log ---\n%s\n--- Caddyfile ---\n%s",
				cmd.ProcessState, c.Logs(), numbered(c.caddyfile))
		default:
		}
		// Started means Caddy has started every app, not only the HTTP
		// server (apps start in no fixed order; the timeblock app opens the
		// store in its Start).
		if strings.Contains(c.logs.String()[logFrom:], `"msg":"serving initial configuration"`) {
			if conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
				conn.Close()
				return nil
			}
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			c.cmd = nil
			return fmt.Errorf("caddy did not answer on %s within %v\n--- caddy log ---\n%s\n--- Caddyfile ---\n%s",
				addr, c.opts.startTimeout, c.Logs(), numbered(c.caddyfile))
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// env is the process environment with a private home: nothing is read from
// or written to the user's Caddy directories.
func (c *Caddy) env() []string {
	env := make([]string, 0, len(os.Environ())+len(c.opts.env)+3)
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME":
			continue
		}
		env = append(env, kv)
	}
	env = append(env,
		"HOME="+filepath.Join(c.Dir, "home"),
		"XDG_CONFIG_HOME="+filepath.Join(c.Dir, "config"),
		"XDG_DATA_HOME="+filepath.Join(c.Dir, "data"),
	)
	return append(env, c.opts.env...)
}

// render fills in the template and adds the harness's global options.
func (c *Caddy) render(caddyfile string) (string, error) {
	tmpl, err := template.New("Caddyfile").Option("missingkey=error").Parse(caddyfile)
	if err != nil {
		return "", fmt.Errorf("caddyfile template: %v", err)
	}
	var b strings.Builder
	if err := tmpl.Execute(&b, c.templateData()); err != nil {
		return "", fmt.Errorf("caddyfile template: %v", err)
	}
	global := fmt.Sprintf("\tadmin 127.0.0.1:%d\n\thttp_port %d\n\thttps_port %d\n\tauto_https off\n\tpersist_config off\n\tdefault_bind 127.0.0.1\n",
		c.Admin, c.HTTP, c.HTTPS)
	return withGlobalOptions(b.String(), global), nil
}

func (c *Caddy) templateData() any {
	return struct {
		Ports
		Dir string
	}{c.Ports, c.Dir}
}

// withGlobalOptions puts lines at the top of the Caddyfile's global options
// block, which must come first, or adds a block holding them.
func withGlobalOptions(caddyfile, lines string) string {
	i := 0
	for i < len(caddyfile) {
		switch caddyfile[i] {
		case ' ', '\t', '\r', '\n':
			i++
			continue
		case '#':
			if nl := strings.IndexByte(caddyfile[i:], '\n'); nl >= 0 {
				i += nl + 1
				continue
			}
			i = len(caddyfile)
			continue
		}
		break
	}
	// A lone "{" can only open the global options block: site blocks start
	// with an address.
	if i < len(caddyfile) && caddyfile[i] == '{' && (i+1 == len(caddyfile) || strings.ContainsRune(" \t\r\n", rune(caddyfile[i+1]))) {
		return caddyfile[:i+1] + "\n" + lines + caddyfile[i+1:]
	}
	return "{\n" + lines + "}\n" + caddyfile
}

// plainLog renders Caddy's JSON log lines as "<level>: <msg>" so that error
// messages read as Caddy printed them, quotes unescaped. Other lines are kept.
func plainLog(out []byte) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(string(out), "\n") {
		var entry struct{ Level, Msg string }
		if err := json.Unmarshal([]byte(line), &entry); err == nil && entry.Msg != "" {
			fmt.Fprintf(&b, "%s: %s\n", entry.Level, entry.Msg)
			continue
		}
		b.WriteString(line)
	}
	return b.String()
}

// numbered prefixes each line with its number, for error messages.
func numbered(s string) string {
	var b strings.Builder
	for i, line := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		fmt.Fprintf(&b, "%3d  %s\n", i+1, line)
	}
	return b.String()
}

// freePorts asks the kernel for n distinct free loopback ports.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %v", err)
		}
		// Held open until all are chosen, so they differ.
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// build is the caddy binary of this test process.
var build struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// Binary returns the path of the caddy binary built from
// github.com/timeblock/timeblock/cmd/caddy, building it on first use.
func Binary(t testing.TB) string {
	t.Helper()
	build.once.Do(func() {
		build.dir, build.err = os.MkdirTemp("", "timeblock-e2e-")
		if build.err != nil {
			return
		}
		build.path = filepath.Join(build.dir, "caddy")
		cmd := exec.Command("go", "build", "-o", build.path, "github.com/timeblock/timeblock/cmd/caddy")
		if out, err := cmd.CombinedOutput(); err != nil {
			build.err = fmt.Errorf("%v\n%s", err, out)
		}
	})
	if build.err != nil {
		t.Fatalf("e2e: building caddy: %v", build.err)
	}
	return build.path
}

// Main runs the tests, then removes the caddy binary. Call it from
// TestMain.
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run is Main for a TestMain with work of its own after the tests: it runs
// them, removes the caddy binary and returns the exit code.
func Run(m *testing.M) int {
	code := m.Run()
	if build.dir != "" {
		os.RemoveAll(build.dir)
	}
	return code
}

// logBuffer collects caddy's output; the process writes while tests read.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) WriteString(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(s)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
