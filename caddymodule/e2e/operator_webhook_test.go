package e2e_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	e2e "github.com/timeblock/timeblock/caddymodule/e2e"
)

const webhookCaddyfile = `{
	timeblock {
		secret {$TIMEBLOCK_SECRET}
		terms_version 2026-11
		lifecycle_interval 1s
		operator_webhook %URL% {env.TIMEBLOCK_WEBHOOK_SECRET}
		pool manual {
			model m-manual
			slots 1
			block europe 90
			manual_provisioning
		}
	}
}

:{{.HTTP}} {
	handle /api/* {
		timeblock_accounts
	}
}
`

// TestOperatorWebhookPendingKey buys seats on a manual_provisioning pool
// through a real Caddy: the operator's webhook gets subscription.pending_key
// for that subscription, signed with the configured secret.
func TestOperatorWebhookPendingKey(t *testing.T) {
	const secret = "e2e-webhook-secret-0123456789"
	type post struct {
		signature string
		body      []byte
	}
	var (
		mu    sync.Mutex
		posts []post
	)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		posts = append(posts, post{r.Header.Get("Timeblock-Signature"), b})
		mu.Unlock()
	}))
	defer recv.Close()

	c := e2e.Start(t, strings.Replace(webhookCaddyfile, "%URL%", recv.URL+"/hooks/timeblock", 1),
		e2e.WithEnv("TIMEBLOCK_SECRET=webhook-e2e-secret-0123456789", "TIMEBLOCK_WEBHOOK_SECRET="+secret))
	u := &client{t: t, base: c.URL(), admin: c.AdminURL()}
	created := u.do("POST", c.AdminURL()+"/timeblock/users", map[string]any{"email": "buyer@example.com"}, 201)
	u.token = created.Get("data.sessionToken").Str
	u.api("POST", "/api/billing/setup-intent", map[string]any{"paymentMethod": "pm_card_visa"}, 200)
	sub := u.api("POST", "/api/pools/manual/subscribe", map[string]any{"blocks": []string{"europe"},
		"acknowledgment": map[string]string{"version": "2026-11"}}, 201)
	subID := sub.Get("data.id").Str
	if s := sub.Get("data.status").Str; s != "pending_key" {
		t.Fatalf("status %q, want pending_key", s)
	}

	var got post
	deadline := time.Now().Add(15 * time.Second)
	for got.body == nil && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		mu.Lock()
		for _, p := range posts {
			if gjson.GetBytes(p.body, "type").Str == "subscription.pending_key" {
				got = p
			}
		}
		mu.Unlock()
	}
	if got.body == nil {
		t.Fatalf("no subscription.pending_key reached the webhook in 15 s; posts: %v", posts)
	}
	ts, v1, _ := strings.Cut(strings.TrimPrefix(got.signature, "t="), ",v1=")
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "." + string(got.body)))
	if want := hex.EncodeToString(mac.Sum(nil)); v1 != want || ts == "" {
		t.Errorf("Timeblock-Signature %q does not verify with the configured secret (want v1=%s)", got.signature, want)
	}
	ev := gjson.ParseBytes(got.body)
	if !strings.HasPrefix(ev.Get("id").Str, "evt_") || !ev.Get("createdAt").Exists() {
		t.Errorf("payload %s: want id evt_..., createdAt", got.body)
	}
	if ev.Get("data.subscriptionId").Str != subID || ev.Get("data.poolSlug").Str != "manual" ||
		ev.Get("data.email").Str != "buyer@example.com" || !strings.Contains(ev.Get("data.todo").Str, "/timeblock/subscriptions/"+subID+"/deliver") {
		t.Errorf("data %s: want the subscription, pool, buyer and the deliver endpoint", ev.Get("data").Raw)
	}
	if strings.Contains(string(got.body), u.token) {
		t.Errorf("the event carries the buyer's session token")
	}
}
