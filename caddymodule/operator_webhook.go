package caddymodule

// The operator_webhook option: where operator notices are posted
// (accounts/operator_events.go) and the secret they are signed with.

import (
	"fmt"
	"net/url"

	"github.com/caddyserver/caddy/v2"
)

// minWebhookSecretLength is the shortest signing secret accepted.
const minWebhookSecretLength = 16

// OperatorWebhookConfig is the operator's webhook endpoint.
type OperatorWebhookConfig struct {
	// URL receives a POST per event (http or https).
	URL string `json:"url"`
	// Secret signs each post (Timeblock-Signature); at least 16 characters.
	Secret string `json:"secret"`
}

// provision replaces placeholders such as {env.TIMEBLOCK_WEBHOOK_SECRET}.
func (w *OperatorWebhookConfig) provision(repl *caddy.Replacer) {
	w.URL = repl.ReplaceAll(w.URL, "")
	w.Secret = repl.ReplaceAll(w.Secret, "")
}

// validate checks the URL and the secret, saying what to fix.
func (w *OperatorWebhookConfig) validate() error {
	u, err := url.Parse(w.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("operator_webhook: %q is not an http or https URL; write it in full, e.g. "+
			"operator_webhook https://ops.example.com/timeblock {env.TIMEBLOCK_WEBHOOK_SECRET}", w.URL)
	}
	if len(w.Secret) < minWebhookSecretLength {
		return fmt.Errorf("operator_webhook: the signing secret is too short (%d characters); use at least %d random characters, "+
			"e.g. from `openssl rand -hex 32`, and give the same secret to the receiver", len(w.Secret), minWebhookSecretLength)
	}
	return nil
}
