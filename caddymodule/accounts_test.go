package caddymodule

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestAccountsCaddyfileSignIn(t *testing.T) {
	var a Accounts
	err := a.UnmarshalCaddyfile(caddyfile.NewTestDispenser("timeblock_accounts {\n site_address https://seats.example\n identity_header Remote-Email\n}"))
	if err != nil {
		t.Fatal(err)
	}
	if a.SiteAddress != "https://seats.example" || a.IdentityHeader != "Remote-Email" {
		t.Fatalf("parsed %+v", a)
	}
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ in, want string }{
		{"timeblock_accounts {\n site_address\n}", "site_address needs a value"},
		{"timeblock_accounts {\n identity_header A B\n}", "takes one value"},
	} {
		var a Accounts
		if err := a.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.in, err, tc.want)
		}
	}
	for _, bad := range []Accounts{
		{SiteAddress: "seats.example"},
		{SiteAddress: "https://seats.example/account/"},
		{SiteAddress: "ftp://seats.example"},
		{IdentityHeader: "authorization"},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v validated", bad)
		}
	}
}

func TestAppCaddyfileSignUp(t *testing.T) {
	var app App
	if err := app.UnmarshalCaddyfile(caddyfile.NewTestDispenser("timeblock {\n sign_up invite\n}")); err != nil || app.SignUp != "invite" {
		t.Fatalf("sign_up invite: %q, %v", app.SignUp, err)
	}
	err := (&App{}).UnmarshalCaddyfile(caddyfile.NewTestDispenser("timeblock {\n sign_up maybe\n}"))
	if err == nil || !strings.Contains(err.Error(), "use open") {
		t.Fatalf("sign_up maybe: %v", err)
	}
}
