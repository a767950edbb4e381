package e2e_test

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/timeblock/timeblock/caddymodule/e2e"
)

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, b)
	}
	return string(b)
}

func TestHarness(t *testing.T) {
	const caddyfile = `# a comment before the global options block
{
	grace_period 2s
}

:{{.HTTP}} {
	timeblock_simulator {
		model %s
	}
}

:{{.Upstream}} {
	respond "upstream {{.Upstream}}"
}
`
	c := e2e.Start(t, strings.Replace(caddyfile, "%s", "first", 1))
	if got := get(t, c.URL()+"/v1/models"); !strings.Contains(got, `"id":"first"`) {
		t.Errorf("models = %s", got)
	}
	if got := get(t, c.UpstreamURL()); got != "upstream "+strconv.Itoa(c.Upstream) {
		t.Errorf("upstream site = %q", got)
	}
	if got := get(t, c.AdminURL()+"/config/apps/http/servers"); !strings.Contains(got, "timeblock_simulator") {
		t.Errorf("admin config = %s", got)
	}

	if err := c.Reload(strings.Replace(caddyfile, "%s", "second", 1)); err != nil {
		t.Fatal(err)
	}
	if got := get(t, c.URL()+"/v1/models"); !strings.Contains(got, `"id":"second"`) {
		t.Errorf("after reload, models = %s", got)
	}

	// A rejected reload says why and leaves the running config alone.
	err := c.Reload(strings.Replace(caddyfile, "model %s", "token_rate fast", 1))
	if err == nil || !strings.Contains(err.Error(), `"fast"`) {
		t.Errorf("reload with a bad option: %v", err)
	}

	c.Restart()
	if got := get(t, c.URL()+"/v1/models"); !strings.Contains(got, `"id":"second"`) {
		t.Errorf("after restart, models = %s", got)
	}
	if !strings.Contains(c.Logs(), "--- restart ---") {
		t.Errorf("the log does not span the restart")
	}
}

// TestHarnessDataDir checks that Caddy's data, here the embedded account
// store, lives in the instance's private directory.
func TestHarnessDataDir(t *testing.T) {
	c := e2e.Start(t, `{
	timeblock {
		secret {$TIMEBLOCK_SECRET}
	}
}

:{{.HTTP}} {
	respond ok
}
`, e2e.WithEnv("TIMEBLOCK_SECRET=harness-secret-0123456789"))
	db := filepath.Join(c.Dir, "data", "caddy", "timeblock", "timeblock.db")
	if _, err := os.Stat(db); err != nil {
		t.Errorf("embedded store: %v\n%s", err, c.Logs())
	}
}
