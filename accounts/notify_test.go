package accounts_test

import (
	"bufio"
	"context"
	"net"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/timeblock/timeblock/accounts"
)

// fakeSMTP accepts one message on a loopback port and hands over the
// envelope and the data.
type fakeSMTP struct {
	addr string
	got  chan smtpMessage
}

type smtpMessage struct {
	from, to, data string
}

func startFakeSMTP(t *testing.T) *fakeSMTP {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	f := &fakeSMTP{addr: ln.Addr().String(), got: make(chan smtpMessage, 1)}
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		tp := textproto.NewConn(conn)
		var msg smtpMessage
		tp.PrintfLine("220 fake ESMTP")
		for {
			line, err := tp.ReadLine()
			if err != nil {
				return
			}
			cmd := strings.ToUpper(line)
			switch {
			case strings.HasPrefix(cmd, "EHLO"), strings.HasPrefix(cmd, "HELO"):
				tp.PrintfLine("250 fake")
			case strings.HasPrefix(cmd, "MAIL FROM:"):
				msg.from = strings.Trim(line[len("MAIL FROM:"):], "<> ")
				tp.PrintfLine("250 ok")
			case strings.HasPrefix(cmd, "RCPT TO:"):
				msg.to = strings.Trim(line[len("RCPT TO:"):], "<> ")
				tp.PrintfLine("250 ok")
			case cmd == "DATA":
				tp.PrintfLine("354 go on")
				b, err := tp.ReadDotBytes()
				if err != nil {
					return
				}
				msg.data = string(b)
				tp.PrintfLine("250 queued")
			case cmd == "QUIT":
				tp.PrintfLine("221 bye")
				f.got <- msg
				return
			default:
				tp.PrintfLine("250 ok")
			}
		}
	}()
	return f
}

func TestSMTPNotifier(t *testing.T) {
	srv := startFakeSMTP(t)
	n := accounts.SMTPNotifier{Addr: srv.addr, From: "keys@timeblock.test"}
	user := &accounts.User{ID: "u1", Email: "wes@example.test", Name: "Wes\r\nBcc: evil@example.test"}
	sub := &accounts.Subscription{ID: "sub-1", Blocks: []accounts.Block{accounts.BlockEurope}, Quantity: 2,
		CurrentPeriodEnd: time.Date(2035, 2, 1, 0, 0, 0, 0, time.UTC)}
	pool := &accounts.Pool{Slug: "qwen", ModelName: "Qwen\nX-Injected: 1"}
	if err := n.KeyDelivered(context.Background(), user, sub, pool); err != nil {
		t.Fatal(err)
	}
	var msg smtpMessage
	select {
	case msg = <-srv.got:
	case <-time.After(10 * time.Second):
		t.Fatal("no message reached the server")
	}
	if msg.from != "keys@timeblock.test" || msg.to != "wes@example.test" {
		t.Errorf("envelope %q → %q", msg.from, msg.to)
	}
	tp := textproto.NewReader(bufio.NewReader(strings.NewReader(msg.data)))
	hdr, err := tp.ReadMIMEHeader()
	if err != nil {
		t.Fatalf("headers: %v\n%s", err, msg.data)
	}
	if hdr.Get("Subject") != "Your key for Qwen X-Injected: 1 is ready" || hdr.Get("To") != "wes@example.test" ||
		!strings.HasPrefix(hdr.Get("Content-Type"), "text/plain") || hdr.Get("Bcc") != "" || hdr.Get("X-Injected") != "" {
		t.Errorf("headers %v", hdr)
	}
	for _, want := range []string{"sub-1", "europe (08:00-15:59 UTC)", "GET /api/keys", "does not contain the key", "2035-02-01"} {
		if !strings.Contains(msg.data, want) {
			t.Errorf("message lacks %q:\n%s", want, msg.data)
		}
	}
	if strings.Contains(msg.data, "sk_pool_") {
		t.Error("the notice contains a key")
	}

	// An unreachable server is an error, not a hang.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()
	if err := (accounts.SMTPNotifier{Addr: dead, From: "a@b.test"}).KeyDelivered(context.Background(), user, sub, pool); err == nil {
		t.Error("sending to a closed port succeeded")
	}
	if err := (accounts.SMTPNotifier{Addr: srv.addr, From: "a@b.test\r\nBcc: x"}).KeyDelivered(context.Background(), user, sub, pool); err == nil {
		t.Error("a sender with a line break was accepted")
	}
}

func TestLogNotifier(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	n := accounts.LogNotifier{Logger: zap.New(core)}
	err := n.KeyDelivered(context.Background(), &accounts.User{ID: "u1", Email: "xi@example.test"},
		&accounts.Subscription{ID: "s1"}, &accounts.Pool{Slug: "p"})
	if err != nil {
		t.Fatal(err)
	}
	entries := logs.All()
	if len(entries) != 1 || entries[0].ContextMap()["subscription_id"] != "s1" || entries[0].ContextMap()["email"] != "xi@example.test" {
		t.Errorf("logged %+v", entries)
	}
	// The zero value works (no logger).
	if err := (accounts.LogNotifier{}).KeyDelivered(context.Background(), &accounts.User{}, &accounts.Subscription{}, &accounts.Pool{}); err != nil {
		t.Error(err)
	}
}

func TestSMTPFundingNotices(t *testing.T) {
	pool := &accounts.Pool{Slug: "kimi", ModelName: "Kimi\r\nBcc: evil@example.test", FundingGoal: "600"}
	user := &accounts.User{ID: "u1", Email: "wes@example.test", Name: "Wes"}
	for _, tc := range []struct {
		kind, to, subject string
		user              *accounts.User
		wants             []string
	}{
		{accounts.NoticePledgeRecorded, "wes@example.test", "Your pledge for Kimi Bcc: evil@example.test is recorded", user, []string{"Nothing is charged now", "35 USD", "DELETE /api/pools/kimi/pledge"}},
		{accounts.NoticePledgeReleased, "wes@example.test", "Your pledge for Kimi Bcc: evil@example.test is released", user, []string{"Nothing was charged"}},
		{accounts.NoticeGoalReached, "ops@example.test", "Funding goal reached: Kimi Bcc: evil@example.test", nil, []string{"/timeblock/pools/kimi/status", `"status":"active"`, "goal 600"}},
		{accounts.NoticePoolLive, "wes@example.test", "Kimi Bcc: evil@example.test is live: your key can be created", user, []string{"charged 35 USD", "POST /api/keys/subscription"}},
		{accounts.NoticeGoalLost, "ops@example.test", "Funding goal no longer reached: Kimi Bcc: evil@example.test", nil, []string{"35 USD a month is pledged now, under its goal of 600", "funding again", "/timeblock/pools/kimi/status"}},
		{accounts.NoticeChargeFailed, "wes@example.test", "Your pledge for Kimi Bcc: evil@example.test is released: the card was declined", user,
			[]string{"card declined", "Nothing was charged", "seats are free again", "setup-intent", "POST /api/pools/kimi/subscribe"}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			srv := startFakeSMTP(t)
			n := accounts.SMTPNotifier{Addr: srv.addr, From: "keys@timeblock.test", Operator: "ops@example.test"}
			err := n.Funding(context.Background(), tc.user, accounts.FundingNotice{Kind: tc.kind, Pool: pool, SubscriptionID: "sub-1",
				Amount: "35", Reason: "card declined"})
			if err != nil {
				t.Fatal(err)
			}
			var msg smtpMessage
			select {
			case msg = <-srv.got:
			case <-time.After(10 * time.Second):
				t.Fatal("no message reached the server")
			}
			hdr, err := textproto.NewReader(bufio.NewReader(strings.NewReader(msg.data))).ReadMIMEHeader()
			if err != nil {
				t.Fatalf("headers: %v\n%s", err, msg.data)
			}
			if msg.to != tc.to || hdr.Get("Subject") != tc.subject || hdr.Get("Bcc") != "" {
				t.Errorf("to %q, headers %v", msg.to, hdr)
			}
			for _, want := range tc.wants {
				if !strings.Contains(msg.data, want) {
					t.Errorf("message lacks %q:\n%s", want, msg.data)
				}
			}
		})
	}
	// Without an operator address, the operator's notice is logged.
	core, logs := observer.New(zap.InfoLevel)
	n := accounts.SMTPNotifier{Addr: "127.0.0.1:1", From: "keys@timeblock.test", Logger: zap.New(core)}
	if err := n.Funding(context.Background(), nil, accounts.FundingNotice{Kind: accounts.NoticeGoalReached, Pool: pool, Amount: "640"}); err != nil {
		t.Fatal(err)
	}
	if got := logs.FilterMessage("notice: goal reached").All(); len(got) != 1 || got[0].ContextMap()["to"] != "operator" {
		t.Errorf("logged %+v", logs.All())
	}
}
