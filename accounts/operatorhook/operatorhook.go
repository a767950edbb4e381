// Package operatorhook posts operator events (accounts.OperatorEvent) to the
// operator's webhook, signed as SPEC.md §8 fixes:
//
//	Timeblock-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>
//
// The receiver recomputes the HMAC over the timestamp, a dot and the raw
// body, compares it in constant time, and rejects old timestamps.
package operatorhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/timeblock/timeblock/accounts"
)

// SignatureHeader is the header that carries the signature.
const SignatureHeader = "Timeblock-Signature"

// Timeout bounds one delivery attempt: no answer by then is a failure.
const Timeout = 10 * time.Second

// Client posts events to one URL, signed with one secret.
type Client struct {
	url    string
	secret []byte
	http   *http.Client
	now    func() time.Time
}

// New returns a client for url, signing with secret.
func New(url, secret string) *Client {
	hc := &http.Client{
		Timeout: Timeout,
		// A redirect would turn the POST into a GET: answer it as a failure.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return &Client{url: url, secret: []byte(secret), http: hc, now: time.Now}
}

// Sign returns the value of the signature header for body sent at t.
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(ts))
	mac.Write([]byte("."))
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

// Post sends payload; any answer but 2xx, or none within Timeout, is an error.
func (c *Client) Post(ctx context.Context, payload []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(payload))
	if err != nil {
		return fmt.Errorf("operator webhook: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Timeblock-Webhook/1")
	req.Header.Set(SignatureHeader, Sign(c.secret, c.now(), payload))
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("operator webhook: %w", err)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("operator webhook answered %s: %q", resp.Status, bytes.TrimSpace(snippet))
	}
	return nil
}

// Interface guard.
var _ accounts.OperatorWebhook = (*Client)(nil)
