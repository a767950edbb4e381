package caddymodule

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// `operators` lists the operators' e-mails, lower-cased, over one or more
// lines; it needs at least one and refuses a comma-separated list.
func TestOperatorsCaddyfile(t *testing.T) {
	var app App
	err := app.UnmarshalCaddyfile(caddyfile.NewTestDispenser("timeblock {\n operators Ops@Example.com ada@example.com\n operators bob@example.com\n}"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ops@example.com", "ada@example.com", "bob@example.com"}
	if !slices.Equal(app.Operators, want) {
		t.Fatalf("Operators = %q, want %q", app.Operators, want)
	}
	js, err := json.Marshal(&app)
	if err != nil || !strings.Contains(string(js), `"operators":["ops@example.com","ada@example.com","bob@example.com"]`) {
		t.Fatalf("JSON = %s (%v), want the operators under \"operators\"", js, err)
	}
	for _, tc := range []struct{ input, want string }{
		{"timeblock {\n operators\n}", "operators needs the operators' sign-in e-mail addresses"},
		{"timeblock {\n operators a@example.com, b@example.com\n}", "separate the addresses with spaces, not commas"},
	} {
		var app App
		err := app.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.input))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "Testfile:") {
			t.Errorf("%q: error = %v, want it to contain %q and the line", tc.input, err, tc.want)
		}
	}
}
