package caddymodule

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/accounts/billing/stripe"
)

// BillingConfig selects the payment processor. Without it the built-in test
// processor is used (no money moves).
type BillingConfig struct {
	// Processor is "stripe".
	Processor string `json:"processor"`
	// SecretKey is the Stripe secret (sk_live_/sk_test_) or restricted (rk_)
	// key; placeholders such as {env.STRIPE_SECRET_KEY} are replaced.
	SecretKey string `json:"secret_key,omitempty"`
	// WebhookSecret is the signing secret (whsec_) of the webhook endpoint
	// POST /api/billing/webhook.
	WebhookSecret string `json:"webhook_secret,omitempty"`
	// PublishableKey (pk_live_/pk_test_) is given to the account page, whose
	// card form is Stripe Elements; without it the page cannot take cards.
	PublishableKey string `json:"publishable_key,omitempty"`
	// APIBase replaces https://api.stripe.com (stripe-mock, tests).
	APIBase string `json:"api_base,omitempty"`
	// StatementDescriptor is the suffix shown after the account's statement
	// descriptor on card statements (at most 22 characters).
	StatementDescriptor string `json:"statement_descriptor,omitempty"`
}

// provision replaces placeholders.
func (b *BillingConfig) provision(repl *caddy.Replacer) {
	b.SecretKey = repl.ReplaceAll(b.SecretKey, "")
	b.WebhookSecret = repl.ReplaceAll(b.WebhookSecret, "")
	b.APIBase = repl.ReplaceAll(b.APIBase, "")
	b.PublishableKey = repl.ReplaceAll(b.PublishableKey, "")
}

// validate refuses a missing or malformed key, saying which.
func (b *BillingConfig) validate() error {
	if b.Processor != "stripe" {
		return fmt.Errorf("timeblock: unknown billing processor %q (use billing stripe { ... }, or leave billing out for the built-in test processor)", b.Processor)
	}
	if err := stripe.ValidateSecretKey(b.SecretKey); err != nil {
		return fmt.Errorf("timeblock: billing %w", err)
	}
	if err := stripe.ValidateWebhookSecret(b.WebhookSecret); err != nil {
		return fmt.Errorf("timeblock: billing %w", err)
	}
	if b.APIBase != "" {
		u, err := url.Parse(b.APIBase)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("timeblock: billing stripe: api_base %q is not an http(s) URL such as http://localhost:12111", b.APIBase)
		}
	}
	if k := b.PublishableKey; k != "" && !strings.HasPrefix(k, "pk_live_") && !strings.HasPrefix(k, "pk_test_") {
		return fmt.Errorf("timeblock: billing stripe: publishable_key must be a publishable key (pk_live_... or pk_test_...), from the dashboard's API keys page")
	}
	if len(b.StatementDescriptor) > 22 {
		return fmt.Errorf("timeblock: billing stripe: statement_descriptor %q is longer than 22 characters", b.StatementDescriptor)
	}
	return nil
}

// processor builds the configured processor on the store; it also reads
// the webhook deliveries.
func (b *BillingConfig) processor(st accounts.Store) (*stripe.Processor, error) {
	p, err := stripe.New(stripe.Config{
		SecretKey: b.SecretKey, WebhookSecret: b.WebhookSecret, APIBase: b.APIBase, Store: st,
		StatementDescriptorSuffix: b.StatementDescriptor,
	})
	if err != nil {
		return nil, fmt.Errorf("timeblock: billing %w", err)
	}
	return p, nil
}

// parseBilling parses `billing stripe { secret_key ...; webhook_secret ...;
// publishable_key ...; api_base ...; statement_descriptor ... }`.
func parseBilling(d *caddyfile.Dispenser) (*BillingConfig, error) {
	b := new(BillingConfig)
	if !d.NextArg() {
		return nil, d.Err("billing needs the processor: billing stripe { secret_key {env.STRIPE_SECRET_KEY}; webhook_secret {env.STRIPE_WEBHOOK_SECRET} }")
	}
	b.Processor = d.Val()
	if b.Processor != "stripe" {
		return nil, d.Errf("unknown billing processor %q: use stripe", b.Processor)
	}
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		var err error
		switch d.Val() {
		case "secret_key":
			err = singleArg(d, &b.SecretKey)
		case "webhook_secret":
			err = singleArg(d, &b.WebhookSecret)
		case "publishable_key":
			err = singleArg(d, &b.PublishableKey)
		case "api_base":
			err = singleArg(d, &b.APIBase)
		case "statement_descriptor":
			err = singleArg(d, &b.StatementDescriptor)
		default:
			err = d.Errf("unknown billing stripe option %q (use secret_key, webhook_secret, publishable_key, api_base, statement_descriptor)", d.Val())
		}
		if err != nil {
			return nil, err
		}
	}
	return b, nil
}

var errBillingTwice = errors.New("billing is already set")
