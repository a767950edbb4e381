package caddymodule

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestAppCaddyfileBilling(t *testing.T) {
	d := caddyfile.NewTestDispenser(`timeblock {
		secret {env.TIMEBLOCK_SECRET}
		billing stripe {
			secret_key {env.STRIPE_SECRET_KEY}
			webhook_secret {env.STRIPE_WEBHOOK_SECRET}
			publishable_key {env.STRIPE_PUBLISHABLE_KEY}
			api_base http://localhost:12111
			statement_descriptor TIMEBLOCK
		}
	}`)
	var app App
	if err := app.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(app.Billing)
	want := `{"processor":"stripe","secret_key":"{env.STRIPE_SECRET_KEY}","webhook_secret":"{env.STRIPE_WEBHOOK_SECRET}",` +
		`"publishable_key":"{env.STRIPE_PUBLISHABLE_KEY}","api_base":"http://localhost:12111","statement_descriptor":"TIMEBLOCK"}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestAppCaddyfileBillingErrors(t *testing.T) {
	for _, tc := range []struct{ name, input, want string }{
		{"no processor", "timeblock {\n billing\n}", "billing needs the processor"},
		{"unknown processor", "timeblock {\n billing paypal\n}", `unknown billing processor "paypal"`},
		{"unknown option", "timeblock {\n billing stripe {\n secret sk_test_x\n }\n}", `unknown billing stripe option "secret"`},
		{"key without value", "timeblock {\n billing stripe {\n secret_key\n }\n}", "secret_key needs a value"},
		{"twice", "timeblock {\n billing stripe\n billing stripe\n}", "billing is already set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var app App
			err := app.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.input))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestAppValidateBilling: Caddy refuses to start on a missing or malformed
// key, and the message says which (never the key itself).
func TestAppValidateBilling(t *testing.T) {
	const sk, wh = "sk_test_51Habcdefgh12345678", "whsec_abcdefgh12345678"
	for _, tc := range []struct {
		name string
		b    BillingConfig
		want string // "" = valid
	}{
		{"valid", BillingConfig{Processor: "stripe", SecretKey: sk, WebhookSecret: wh}, ""},
		{"restricted key and api_base", BillingConfig{Processor: "stripe", SecretKey: "rk_live_abcdefgh1234", WebhookSecret: wh, APIBase: "http://127.0.0.1:12111"}, ""},
		{"missing secret_key", BillingConfig{Processor: "stripe", WebhookSecret: wh}, "secret_key is missing"},
		{"unset environment variable", BillingConfig{Processor: "stripe", SecretKey: "{env.NOT_SET}", WebhookSecret: wh}, "secret_key is missing"},
		{"publishable key", BillingConfig{Processor: "stripe", SecretKey: "pk_live_abcdefgh12345678", WebhookSecret: wh}, "publishable key"},
		{"malformed secret_key", BillingConfig{Processor: "stripe", SecretKey: "sk_test_abc", WebhookSecret: wh}, "secret_key sk_test_... is malformed"},
		{"other prefix", BillingConfig{Processor: "stripe", SecretKey: "sec_abcdefgh12345678", WebhookSecret: wh}, "secret_key is malformed"},
		{"missing webhook_secret", BillingConfig{Processor: "stripe", SecretKey: sk}, "webhook_secret is missing"},
		{"malformed webhook_secret", BillingConfig{Processor: "stripe", SecretKey: sk, WebhookSecret: "wh_abcdefgh12345678"}, "webhook_secret is malformed"},
		{"keys swapped", BillingConfig{Processor: "stripe", SecretKey: wh, WebhookSecret: sk}, "webhook signing secret"},
		{"bad api_base", BillingConfig{Processor: "stripe", SecretKey: sk, WebhookSecret: wh, APIBase: "localhost:12111"}, "api_base"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.b
			b.provision(caddy.NewReplacer())
			app := App{Store: &StoreConfig{Backend: "embedded"}, Secret: "0123456789abcdef0123", Billing: &b}
			err := app.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "timeblock: billing") {
				t.Errorf("error %q does not say it is about billing", err)
			}
			for _, secret := range []string{tc.b.SecretKey, tc.b.WebhookSecret} {
				if len(secret) > 12 && strings.Contains(err.Error(), secret) {
					t.Errorf("error %q contains a secret", err)
				}
			}
		})
	}
}
