package caddymodule

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/timeblock/timeblock/accounts/ledger"
)

func TestSellerCaddyfile(t *testing.T) {
	app := new(App)
	err := app.UnmarshalCaddyfile(caddyfile.NewTestDispenser(`timeblock {
		seller {
			name "Example Compute Ltd"
			address "1 Main Street"
			address "Springfield 12345"
			email billing@example.com
			tax_id "EU 123456789"
		}
		secret s
	}`))
	if err != nil {
		t.Fatal(err)
	}
	want := ledger.Seller{Name: "Example Compute Ltd", Address: "1 Main Street\nSpringfield 12345",
		Email: "billing@example.com", TaxID: "EU 123456789"}
	if app.Seller == nil || *app.Seller != want || app.Secret != "s" {
		t.Fatalf("seller %+v (secret %q), want %+v", app.Seller, app.Secret, want)
	}

	for _, tc := range []struct{ input, want string }{
		{"timeblock {\n seller {\n name A\n }\n seller {\n name B\n }\n}", "seller is already set"},
		{"timeblock {\n seller Acme\n}", "seller takes a block"},
		{"timeblock {\n seller {\n name\n }\n}", "seller name needs a value"},
		{"timeblock {\n seller {\n email not-an-address\n }\n}", "not an e-mail address"},
		{"timeblock {\n seller {\n vat 1\n }\n}", `unknown seller option "vat"`},
	} {
		err := new(App).UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.input))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.input, err, tc.want)
		}
	}
}
