package caddymodule

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/standard"
)

func adapt(t *testing.T, caddyfile string) ([]byte, error) {
	t.Helper()
	out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), map[string]any{"filename": "Caddyfile"})
	return out, err
}

// The directives order themselves: written in any order, the gate runs first,
// then translate, then reverse_proxy — with no `order` option.
func TestDirectiveOrder(t *testing.T) {
	out, err := adapt(t, `{
	timeblock {
		secret 0123456789abcdef
	}
}
:8080 {
	reverse_proxy 127.0.0.1:8000
	timeblock_translate messages
	timeblock_gate
}
:8081 {
	timeblock_simulator
}
`)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Apps struct {
			HTTP struct {
				Servers map[string]struct {
					Routes []struct {
						Handle []struct {
							Handler string `json:"handler"`
							Routes  []struct {
								Handle []struct {
									Handler string `json:"handler"`
								} `json:"handle"`
							} `json:"routes"`
						} `json:"handle"`
					} `json:"routes"`
				} `json:"servers"`
			} `json:"http"`
			Timeblock json.RawMessage `json:"timeblock"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, srv := range cfg.Apps.HTTP.Servers {
		for _, r := range srv.Routes {
			for _, h := range r.Handle {
				if h.Handler == "subroute" {
					for _, sr := range h.Routes {
						for _, sh := range sr.Handle {
							order = append(order, sh.Handler)
						}
					}
					continue
				}
				order = append(order, h.Handler)
			}
		}
	}
	got := strings.Join(order, ",")
	if !strings.Contains(got, "timeblock_gate,timeblock_translate,reverse_proxy") {
		t.Errorf("handler order = %s", got)
	}
	if !strings.Contains(got, "timeblock_simulator") {
		t.Errorf("simulator missing: %s", got)
	}
	if !strings.Contains(string(cfg.Apps.Timeblock), `"secret":"0123456789abcdef"`) {
		t.Errorf("timeblock app = %s", cfg.Apps.Timeblock)
	}
}

func TestAdaptErrorNamesLine(t *testing.T) {
	_, err := adapt(t, "{\n\ttimeblock {\n\t\tpool x {\n\t\t\tslots many\n\t\t}\n\t}\n}\n")
	if err == nil || !strings.Contains(err.Error(), "Caddyfile:4") || !strings.Contains(err.Error(), `"many" is not a whole number`) {
		t.Fatalf("error = %v", err)
	}
}
