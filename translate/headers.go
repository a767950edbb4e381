package translate

// What a request carries besides its body, under the field rule (fields.go):
// the messages format's own headers (anthropic-beta, anthropic-version...)
// and its ?beta=true query are hints, passed to a messages upstream and
// dropped for a chat upstream, which knows nothing of them.

import (
	"net/http"
	"strings"
)

const (
	// MessagesVersionHeader names the messages API version a request is
	// written for; the messages SDKs send it on every request.
	MessagesVersionHeader = "Anthropic-Version"
	// MessagesVersion is the version a messages upstream is told when the
	// client named none.
	MessagesVersion = "2023-06-01"
)

// messagesHeaderPrefix starts the names of the messages format's own
// headers, canonical.
const messagesHeaderPrefix = "Anthropic-"

// geminiHeaderPrefix starts the names of the Gemini SDKs' own headers
// (X-Goog-Api-Client, X-Goog-Api-Key), canonical.
const geminiHeaderPrefix = "X-Goog-"

// DropRequestHints removes from r's headers and query the hints of the
// client's format that the upstream's does not know: a Gemini client's
// X-Goog-* headers and its query (alt=sse: the path said it streams), a
// messages client's own headers and ?beta=true on the way to a chat
// upstream.
func DropRequestHints(r *http.Request, client, upstream Format) {
	if client == Gemini {
		for k := range r.Header {
			if len(k) > len(geminiHeaderPrefix) && strings.EqualFold(k[:len(geminiHeaderPrefix)], geminiHeaderPrefix) {
				delete(r.Header, k)
			}
		}
		r.URL.RawQuery = ""
		return
	}
	if upstream != Chat || client != Messages {
		return
	}
	for k := range r.Header {
		if len(k) > len(messagesHeaderPrefix) && strings.EqualFold(k[:len(messagesHeaderPrefix)], messagesHeaderPrefix) {
			delete(r.Header, k)
		}
	}
	if r.URL.RawQuery != "" {
		r.URL.RawQuery = withoutQueryParam(r.URL.RawQuery, "beta")
	}
}

// withoutQueryParam returns the raw query q without its name parameters;
// q itself when it has none.
func withoutQueryParam(q, name string) string {
	if !strings.Contains(q, name) {
		return q
	}
	var b strings.Builder
	for rest := q; rest != ""; {
		var part string
		part, rest, _ = strings.Cut(rest, "&")
		if k, _, _ := strings.Cut(part, "="); k == name {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('&')
		}
		b.WriteString(part)
	}
	return b.String()
}
