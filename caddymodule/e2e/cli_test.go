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

// `caddy validate` provisions a config without starting it, so it must
// neither take the embedded store's lock (the running Caddy holds it) nor
// connect to PostgreSQL, nor create a store file.
func TestValidateTouchesNoStore(t *testing.T) {
	const site = `{
	timeblock {
		secret 0123456789abcdef0123
		%s
		pool p {
			model m
			slots 1
			block europe 10
		}
	}
}
:{{.HTTP}} {
	timeblock_gate
	reverse_proxy 127.0.0.1:{{.Upstream}}
}
`
	c := e2e.Start(t, strings.Replace(site, "%s", "store embedded {{.Dir}}/timeblock.db", 1))
	running := filepath.Join(c.Dir, "Caddyfile")
	if out, err := e2e.CLI(t, "validate", "--config", running, "--adapter", "caddyfile"); err != nil {
		t.Errorf("caddy validate of the running config (its store file locked): %v\n%s", err, out)
	}

	dir := t.TempDir()
	for name, store := range map[string]string{
		"embedded, no file yet": "store embedded " + filepath.Join(dir, "new", "timeblock.db"),
		"postgres, no server":   "store postgres postgres://timeblock@127.0.0.1:1/nothing?connect_timeout=1",
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".Caddyfile")
			cf := strings.NewReplacer("%s", store, "{{.Upstream}}", "9", "{{.HTTP}}", "0").Replace(site)
			if err := os.WriteFile(path, []byte(cf), 0o600); err != nil {
				t.Fatal(err)
			}
			if out, err := e2e.CLI(t, "validate", "--config", path, "--adapter", "caddyfile"); err != nil {
				t.Errorf("caddy validate: %v\n%s", err, out)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "new")); !os.IsNotExist(err) {
		t.Errorf("caddy validate created the embedded store's directory (stat: %v)", err)
	}
}
