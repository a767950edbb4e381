package translate

import (
	"fmt"
	"strings"
)

// Format is an inference wire format. Chat and Messages are spoken by
// clients and upstreams alike; Responses (the OpenAI Responses API) and
// Gemini (the Gemini API) only by clients: they are translated to either
// upstream format. What each format reads and writes is its codec
// (codec.go).
type Format uint8

const (
	// Unknown is no format: a path that is neither endpoint.
	Unknown Format = iota
	// Chat is the chat completions format (POST /v1/chat/completions).
	Chat
	// Messages is the messages format (POST /v1/messages).
	Messages
	// Responses is the OpenAI Responses API (POST /v1/responses). Its errors
	// have the chat format's shape.
	Responses
	// Gemini is the Gemini API (POST .../v1beta/models/{model}:generateContent
	// and :streamGenerateContent), whose path names the model and whether
	// the answer streams (Call).
	Gemini
)

const (
	// ChatPath is the path suffix of the chat completions endpoint.
	ChatPath = "/v1/chat/completions"
	// MessagesPath is the path suffix of the messages endpoint.
	MessagesPath = "/v1/messages"
	// ResponsesPath is the path suffix of the Responses endpoint.
	ResponsesPath = "/v1/responses"
)

// FormatFromPath tells the client's format from the request path, which ends
// in /v1/chat/completions, /v1/messages or /v1/responses (a trailing slash is
// tolerated), or is a Gemini model's generateContent or
// streamGenerateContent (ParseGeminiPath).
func FormatFromPath(p string) Format {
	q := strings.TrimSuffix(p, "/")
	switch {
	case strings.HasSuffix(q, ChatPath):
		return Chat
	case strings.HasSuffix(q, MessagesPath):
		return Messages
	case strings.HasSuffix(q, ResponsesPath):
		return Responses
	}
	if _, m, ok := ParseGeminiPath(p); ok && (m == GeminiGenerate || m == GeminiStream) {
		return Gemini
	}
	return Unknown
}

// ParseFormat reads "chat" or "messages", as written in the Caddyfile.
func ParseFormat(s string) (Format, error) {
	switch s {
	case "chat":
		return Chat, nil
	case "messages":
		return Messages, nil
	}
	return Unknown, fmt.Errorf("unknown format %q (use chat or messages)", s)
}

// Path is the default upstream path of the format.
func (f Format) Path() string {
	switch f {
	case Chat:
		return ChatPath
	case Messages:
		return MessagesPath
	}
	return ""
}

func (f Format) String() string {
	switch f {
	case Chat:
		return "chat"
	case Messages:
		return "messages"
	case Responses:
		return "responses"
	case Gemini:
		return "gemini"
	}
	return "unknown"
}
