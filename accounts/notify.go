package accounts

// Notices to users: "your key is ready", sent when the operator delivers a
// manually provisioned key, and the one-time sign-in link. A notice never
// contains a key itself: the user fetches it through the account API.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/smtp"
	"strings"
	"time"

	"go.uber.org/zap"
)

// Notifier sends notices to users.
type Notifier interface {
	// KeyDelivered tells the user that the key of sub is ready.
	KeyDelivered(ctx context.Context, user *User, sub *Subscription, pool *Pool) error
	// SignInLink sends a one-time sign-in link to email.
	SignInLink(ctx context.Context, email, link string, expires time.Time) error
	// Funding sends a funding notice (notify_funding.go) to user, or to the
	// operator when user is nil.
	Funding(ctx context.Context, user *User, n FundingNotice) error
}

// LogNotifier writes notices to the log (the default when no mail server is
// configured).
type LogNotifier struct{ Logger *zap.Logger }

// KeyDelivered logs the notice.
func (n LogNotifier) KeyDelivered(_ context.Context, user *User, sub *Subscription, pool *Pool) error {
	logger := n.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	logger.Info("notice: key delivered",
		zap.String("user_id", user.ID),
		zap.String("email", user.Email),
		zap.String("subscription_id", sub.ID),
		zap.String("pool", pool.Slug))
	return nil
}

// SignInLink logs the link, so that without a mail server (the quick start)
// whoever reads the log can sign in: configure smtp before strangers can
// reach the site.
func (n LogNotifier) SignInLink(_ context.Context, email, link string, expires time.Time) error {
	logger := n.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	logger.Info("notice: sign-in link (no smtp configured, so it is logged here instead of mailed)",
		zap.String("email", email),
		zap.String("link", link),
		zap.Time("expires", expires))
	return nil
}

// SMTPNotifier sends notices as plain-text e-mail through an SMTP server.
// With Username set it authenticates with PLAIN, which net/smtp only allows
// over TLS (STARTTLS is used when the server offers it) or to localhost.
type SMTPNotifier struct {
	Addr     string // host:port of the mail server
	From     string // sender address
	Username string // optional
	Password string
	// Operator receives the notices meant for the operator (a funding
	// goal reached); "" logs them only.
	Operator string
	Logger   *zap.Logger // where operator notices go without Operator; nil: nowhere
}

// KeyDelivered mails the notice to the user.
func (n SMTPNotifier) KeyDelivered(ctx context.Context, user *User, sub *Subscription, pool *Pool) error {
	msg, err := keyDeliveredMessage(n.From, user, sub, pool, time.Now())
	if err != nil {
		return err
	}
	return n.send(ctx, user.Email, msg)
}

// SignInLink mails the link.
func (n SMTPNotifier) SignInLink(ctx context.Context, email, link string, expires time.Time) error {
	msg, err := signInMessage(n.From, email, link, expires, time.Now())
	if err != nil {
		return err
	}
	return n.send(ctx, email, msg)
}

// send delivers one message to one recipient.
func (n SMTPNotifier) send(ctx context.Context, to string, msg []byte) error {
	var auth smtp.Auth
	if n.Username != "" {
		host, _, err := net.SplitHostPort(n.Addr)
		if err != nil {
			return fmt.Errorf("smtp address %q: %w", n.Addr, err)
		}
		auth = smtp.PlainAuth("", n.Username, n.Password, host)
	}
	// net/smtp takes no context; run it aside so a cancelled ctx returns.
	done := make(chan error, 1)
	go func() { done <- smtp.SendMail(n.Addr, auth, n.From, []string{to}, msg) }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("sending a notice to %s: %w", to, err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("sending a notice to %s: %w", to, ctx.Err())
	}
}

// keyDeliveredMessage builds the RFC 5322 message of the notice.
func keyDeliveredMessage(from string, user *User, sub *Subscription, pool *Pool, now time.Time) ([]byte, error) {
	for _, v := range []string{from, user.Email} {
		if v == "" || strings.ContainsAny(v, "\r\n") {
			return nil, errors.New("notice: sender and recipient addresses must be set and on one line")
		}
	}
	poolName := oneLine(pool.ModelName)
	if poolName == "" {
		poolName = oneLine(pool.Slug)
	}
	hours := make([]string, 0, len(sub.Blocks))
	for _, b := range sub.Blocks {
		first := b.FirstHour()
		hours = append(hours, fmt.Sprintf("%s (%02d:00-%02d:59 UTC)", b, first, first+HoursPerBlock-1))
	}
	greeting := "Hello"
	if name := oneLine(user.Name); name != "" {
		greeting += " " + name
	}
	var b strings.Builder
	mailHeader(&b, from, user.Email, "Your key for "+poolName+" is ready", now)
	fmt.Fprintf(&b, "%s,\r\n\r\n", greeting)
	fmt.Fprintf(&b, "The key of your subscription %s to %s is ready.\r\n", sub.ID, poolName)
	fmt.Fprintf(&b, "Seats: %d in %s.\r\n", sub.Quantity, strings.Join(hours, ", "))
	fmt.Fprintf(&b, "Current period ends: %s.\r\n\r\n", sub.CurrentPeriodEnd.UTC().Format(time.RFC3339))
	b.WriteString("For your security this message does not contain the key. Retrieve it with\r\n")
	b.WriteString("GET /api/keys (or GET /api/pools/" + pool.Slug + "/my-keys) using your session\r\n")
	b.WriteString("token or a management key.\r\n")
	return []byte(b.String()), nil
}

// signInMessage builds the RFC 5322 message carrying a sign-in link.
func signInMessage(from, email, link string, expires, now time.Time) ([]byte, error) {
	for _, v := range []string{from, email, link} {
		if v == "" || strings.ContainsAny(v, "\r\n") {
			return nil, errors.New("notice: sender, recipient and link must be set and on one line")
		}
	}
	var b strings.Builder
	mailHeader(&b, from, email, "Your sign-in link", now)
	b.WriteString("Hello,\r\n\r\n")
	b.WriteString("Open this link to sign in to your account:\r\n\r\n")
	fmt.Fprintf(&b, "%s\r\n\r\n", link)
	fmt.Fprintf(&b, "It works once, until %s.\r\n", expires.UTC().Format("15:04 UTC on 2 January 2006"))
	b.WriteString("If you did not ask to sign in, ignore this message: nothing happens without the link.\r\n")
	return []byte(b.String()), nil
}

// mailHeader writes the header of a plain-text message and the blank line
// after it; the callers have checked that from and to are on one line.
func mailHeader(b *strings.Builder, from, to, subject string, now time.Time) {
	fmt.Fprintf(b, "From: %s\r\n", from)
	fmt.Fprintf(b, "To: %s\r\n", to)
	fmt.Fprintf(b, "Subject: %s\r\n", subject)
	fmt.Fprintf(b, "Date: %s\r\n", now.Format(time.RFC1123Z))
	b.WriteString("MIME-Version: 1.0\r\n")
	b.WriteString("Content-Type: text/plain; charset=utf-8\r\n")
	b.WriteString("Content-Transfer-Encoding: 8bit\r\n")
	b.WriteString("\r\n")
}

// oneLine removes line breaks so a value cannot inject mail headers.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.NewReplacer("\r", " ", "\n", " ").Replace(s)), " ")
}
