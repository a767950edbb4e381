package operatorhook_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/timeblock/timeblock/accounts/operatorhook"
)

// verify is the receiver's check, as README.md's "Operator notices" shows it.
func verify(secret, header string, body []byte) bool {
	fields := map[string]string{}
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(part, "=")
		fields[k] = v
	}
	sec, err := strconv.ParseInt(fields["t"], 10, 64)
	if err != nil || time.Since(time.Unix(sec, 0)).Abs() > 5*time.Minute {
		return false
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(fields["t"] + "." + string(body)))
	return hmac.Equal([]byte(fields["v1"]), []byte(hex.EncodeToString(mac.Sum(nil))))
}

func TestPostIsVerifiable(t *testing.T) {
	const secret = "0123456789abcdef-secret"
	body := []byte(`{"id":"evt_1","type":"charge.failed","createdAt":"2026-11-28T15:04:05Z","data":{"amount":"12.50"}}`)
	var header string
	var got []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		header = r.Header.Get(operatorhook.SignatureHeader)
		got, _ = io.ReadAll(r.Body)
	}))
	defer srv.Close()
	if err := operatorhook.New(srv.URL, secret).Post(context.Background(), body); err != nil {
		t.Fatal(err)
	}
	if string(got) != string(body) || !verify(secret, header, got) {
		t.Errorf("body %s with %s does not verify", got, header)
	}
	if verify(secret, header, append(got, ' ')) || verify("another secret 0123", header, got) {
		t.Error("a changed body or another secret verifies")
	}
	old := operatorhook.Sign([]byte(secret), time.Now().Add(-10*time.Minute), body)
	if verify(secret, old, body) {
		t.Error("a signature 10 minutes old verifies")
	}
	// The README's shell check gives the same v1.
	if _, err := exec.LookPath("openssl"); err == nil {
		cmd := exec.Command("sh", "-c", `t=${SIG#t=}; t=${t%%,*}
printf '%s.%s' "$t" "$(cat)" | openssl dgst -sha256 -hmac "$TIMEBLOCK_WEBHOOK_SECRET" | sed 's/.* //'`)
		cmd.Env = []string{"SIG=" + header, "TIMEBLOCK_WEBHOOK_SECRET=" + secret, "PATH=/usr/bin:/bin"}
		cmd.Stdin = strings.NewReader(string(body))
		out, err := cmd.Output()
		if _, v1, _ := strings.Cut(header, "v1="); err != nil || strings.TrimSpace(string(out)) != v1 {
			t.Errorf("shell check printed %q (%v), want %s", out, err, v1)
		}
	}
}

func TestPostFailures(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		want    string
	}{
		{"500", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "boom", 500) }, `answered 500 Internal Server Error: "boom"`},
		{"redirect", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/elsewhere", http.StatusFound) }, "answered 302"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			err := operatorhook.New(srv.URL, "0123456789abcdef").Post(context.Background(), []byte(`{}`))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
