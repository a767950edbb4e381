package e2e_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/timeblock/timeblock/caddymodule/e2e"
)

func TestListModules(t *testing.T) {
	out, err := e2e.CLI(t, "list-modules")
	if err != nil {
		t.Fatalf("caddy list-modules: %v\n%s", err, out)
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		listed[strings.TrimSpace(line)] = true
	}
	for _, id := range []string{
		"timeblock",
		"http.handlers.timeblock_gate",
		"http.handlers.timeblock_translate",
		"http.handlers.timeblock_accounts",
		"admin.api.timeblock",
		"http.handlers.timeblock_simulator",
	} {
		if !listed[id] {
			t.Errorf("caddy list-modules does not list %s:\n%s", id, out)
		}
	}
}

func TestAdapt(t *testing.T) {
	t.Run("Caddyfile.example", func(t *testing.T) {
		path, err := filepath.Abs(filepath.Join("..", "..", "Caddyfile.example"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(path); os.IsNotExist(err) {
			t.Skipf("%s does not exist yet; nothing to adapt", path)
		}
		out, err := e2e.CLI(t, "adapt", "--config", path, "--adapter", "caddyfile")
		if err != nil {
			t.Fatalf("caddy adapt %s: %v\n%s", path, err, out)
		}
		for _, want := range []string{`"timeblock":`, `"handler":"timeblock_simulator"`} {
			if !strings.Contains(out, want) {
				t.Errorf("the adapted config lacks %s:\n%s", want, out)
			}
		}
	})

	// Each invalid Caddyfile fails adaptation with its file, line and the
	// bad token.
	for name, tc := range map[string]struct {
		caddyfile string
		line      string
		want      string
	}{
		"pool slots": {`{
	timeblock {
		secret 0123456789abcdef0123
		pool x {
			slots many
		}
	}
}
`, ":5", `slots: "many" is not a whole number`},
		"unknown timeblock option": {`{
	timeblock {
		secrets x
	}
}
`, ":3", `unknown timeblock option "secrets"`},
		"simulator token_rate": {`:8080 {
	timeblock_simulator {
		token_rate fast
	}
}
`, ":3", `token_rate: "fast"`},
		"simulator unknown option": {`:8080 {
	timeblock_simulator {
		temperature 1
	}
}
`, ":3", `unknown timeblock_simulator option "temperature"`},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "Caddyfile")
			if err := os.WriteFile(path, []byte(tc.caddyfile), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := e2e.CLI(t, "adapt", "--config", path, "--adapter", "caddyfile")
			if err == nil {
				t.Fatalf("caddy adapt accepted:\n%s\noutput:\n%s", tc.caddyfile, out)
			}
			if !strings.Contains(out, path+tc.line) || !strings.Contains(out, tc.want) {
				t.Errorf("caddy adapt said:\n%s\nwant %s%s and %q", out, path, tc.line, tc.want)
			}
		})
	}
}
