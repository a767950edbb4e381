package e2e_test

// The Stripe processor in the real caddy: Caddy refuses to start on a bad
// key, and with stripe-mock behind api_base a user saves a card, buys
// (stripe-mock's fixture PaymentIntent is not paid: a 402 that created
// nothing), and the webhook endpoint takes only signed deliveries.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v85/webhook"

	"github.com/timeblock/timeblock/caddymodule/e2e"
)

const (
	e2eStripeKey     = "sk_test_e2e0123456789abcdef"
	e2eWebhookSecret = "whsec_e2e0123456789abcdef"
)

func stripeCaddyfile(apiBase string) string {
	return `{
	timeblock {
		secret e2e-secret-0123456789abcdef
		billing stripe {
			secret_key {env.STRIPE_SECRET_KEY}
			webhook_secret {env.STRIPE_WEBHOOK_SECRET}
			api_base ` + apiBase + `
		}
		pool llama {
			model m
			status active
			slots 2
			block asia 30
		}
	}
}
:{{.HTTP}} {
	handle /api/* {
		timeblock_accounts
	}
}
`
}

func TestStripeRefusesBadKeys(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(stripeCaddyfile("http://127.0.0.1:1"), ":{{.HTTP}}", ":0")), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ key, secret, want string }{
		{"", e2eWebhookSecret, "secret_key is missing"},
		{"pk_live_abcdefgh12345678", e2eWebhookSecret, "publishable key"},
		{e2eStripeKey, "", "webhook_secret is missing"},
		{e2eStripeKey, "secret", "webhook_secret is malformed"},
	} {
		cmd := exec.Command(e2e.Binary(t), "validate", "--config", path, "--adapter", "caddyfile")
		home := t.TempDir()
		cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home, "XDG_DATA_HOME="+home,
			"STRIPE_SECRET_KEY="+tc.key, "STRIPE_WEBHOOK_SECRET="+tc.secret)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("key %q, secret %q: err %v, output %s\nwant a refusal saying %q", tc.key, tc.secret, err, out, tc.want)
		}
		if tc.key != "" && len(tc.key) > 12 && strings.Contains(string(out), tc.key) {
			t.Errorf("the output shows the key: %s", out)
		}
	}
}

func TestStripeWithStripeMock(t *testing.T) {
	base := startStripeMock(t)
	c := e2e.Start(t, stripeCaddyfile(base), e2e.WithEnv("STRIPE_SECRET_KEY="+e2eStripeKey, "STRIPE_WEBHOOK_SECRET="+e2eWebhookSecret))

	do := func(method, url, token string, body any, header map[string]string) (int, map[string]any) {
		t.Helper()
		var rd bytes.Buffer
		if body != nil {
			json.NewEncoder(&rd).Encode(body)
		}
		req, _ := http.NewRequest(method, url, &rd)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	code, created := do("POST", c.AdminURL()+"/timeblock/users", "", map[string]any{"email": "buyer@example.com"}, nil)
	if code != 201 {
		t.Fatalf("create user: %d %v", code, created)
	}
	token := created["data"].(map[string]any)["sessionToken"].(string)

	// stripe-mock answers every SetupIntent with its fixture, whose status is
	// requires_payment_method: the save reached Stripe's API specification
	// and was accepted there, and Timeblock, seeing the setup not succeed,
	// saves nothing (a real card's setup is tested against the stateful fake
	// in accounts/billing/stripe).
	code, saved := do("POST", c.URL()+"/api/billing/setup-intent", token, map[string]any{"paymentMethod": "pm_card_visa"}, nil)
	if code != 402 || !strings.Contains(saved["error"].(string), "not saved") {
		t.Fatalf("setup-intent through stripe-mock: %d %v, want 402 not saved", code, saved)
	}
	code, status := do("GET", c.URL()+"/api/billing/status", token, nil, nil)
	if code != 200 || status["data"].(map[string]any)["processor"] != "stripe" || status["data"].(map[string]any)["hasPaymentMethod"] != false {
		t.Fatalf("billing status: %d %v", code, status)
	}
	code, bought := do("POST", c.URL()+"/api/pools/llama/subscribe", token, map[string]any{"blocks": []string{"asia"}},
		map[string]string{"Idempotency-Key": "e2e-1"})
	if code != 400 || !strings.Contains(bought["error"].(string), "No payment method") {
		t.Fatalf("subscribe without a saved card: %d %v, want 400", code, bought)
	}

	// Webhooks: signed deliveries only.
	payload := []byte(`{"id":"evt_e2e_1","object":"event","type":"customer.created","api_version":"2020-08-27","data":{"object":{"id":"cus_1","object":"customer"}}}`)
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: payload, Secret: e2eWebhookSecret, Timestamp: time.Now()})
	post := func(sig string) int {
		req, _ := http.NewRequest("POST", c.URL()+"/api/billing/webhook", bytes.NewReader(payload))
		if sig != "" {
			req.Header.Set("Stripe-Signature", sig)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(""); code != 400 {
		t.Errorf("unsigned delivery: %d, want 400", code)
	}
	if code := post(signed.Header); code != 200 {
		t.Errorf("signed delivery: %d, want 200", code)
	}
	if strings.Contains(c.Logs(), e2eStripeKey) || strings.Contains(c.Logs(), e2eWebhookSecret) {
		t.Error("a Stripe secret is in Caddy's log")
	}
}

// startStripeMock starts stripe-mock (see accounts/billing/stripe/stripemock_test.go
// for where it is looked for) and returns its base URL.
func startStripeMock(t *testing.T) string {
	t.Helper()
	bin := ""
	if p, err := exec.LookPath("stripe-mock"); err == nil {
		bin = p
	} else if out, err := exec.Command("go", "env", "GOBIN", "GOPATH").Output(); err == nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		var dirs []string
		if lines[0] != "" {
			dirs = append(dirs, lines[0])
		}
		if len(lines) > 1 {
			for _, gp := range filepath.SplitList(lines[1]) {
				dirs = append(dirs, filepath.Join(gp, "bin"))
			}
		}
		for _, d := range dirs {
			if fi, err := os.Stat(filepath.Join(d, "stripe-mock")); err == nil && !fi.IsDir() {
				bin = filepath.Join(d, "stripe-mock")
				break
			}
		}
	}
	if bin == "" {
		msg := "stripe-mock is not installed: go install github.com/stripe/stripe-mock@v0.203.0"
		if os.Getenv("TIMEBLOCK_REQUIRE_STRIPE_MOCK") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	cmd := exec.Command(bin, "-http-addr", "127.0.0.1:", "-https-addr", "127.0.0.1:")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if addr, ok := strings.CutPrefix(sc.Text(), "Listening for HTTP at address: "); ok {
			go func() {
				for sc.Scan() {
				}
			}()
			return "http://" + strings.TrimSpace(addr)
		}
	}
	t.Fatalf("stripe-mock exited before listening: %v", sc.Err())
	return ""
}
