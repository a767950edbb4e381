package translate

// The codec table: what the package knows of each client format, in one
// row. A row says how a client's request becomes the upstream's, how an
// upstream's whole answer becomes the client's, how its stream is written,
// and the format's error body, model list and field names. Adding a client
// format is a row here and the files its functions live in (gemini_*.go
// for Gemini); nothing else switches on the client's format to pick one.
//
// Two kinds of stream writer stand behind the rows. Chat and messages
// clients are written directly from either upstream (stream_from_chat.go,
// stream_from_messages.go, stream_emit.go): the four pairs are the hot
// paths, and the direct writers pay, measured in docs/performance.md. The
// other clients are chat sinks: an inner Stream turns the upstream's
// events, whichever format they are in, into normalised chat chunks
// (reasoning split out, tool calls numbered, nameless calls dropped), and
// the sink writes the client's events from the readings of those chunks
// (chatSink, pivot.go).

// codec is one client format's row.
type codec struct {
	// request reads a client's body s (a JSON object) into cfg.Upstream's
	// format, appending to dst; call is what the request's path says.
	request func(dst []byte, s string, cfg *Config, call Call) ([]byte, Request, *Error)
	// response writes the upstream's whole answer s for the client. req is
	// a copy: a pointer given to a function of the table escapes, and
	// would cost every answer an allocation.
	response func(dst []byte, s string, upstream Format, req Request, prefilled bool) []byte
	// sink returns the writer of the client's stream from chat chunks,
	// reusing the one s kept from its last response; nil for the formats
	// written directly.
	sink func(s *Stream) chatSink
	// comments: the sink's client takes the upstream's SSE comments
	// (keep-alives). Gemini's does not: Google sends none, and the Go and
	// Python SDKs fail on an event that is not data.
	comments bool
	// appendError appends an error body in the format.
	appendError func(dst []byte, e *Error, kind ErrorKind) []byte
	// appendModel and appendModelList write the model endpoints' answers
	// (models_list.go): one model, and the list, paged as the raw query
	// asks; a message returned tells the client which parameter is bad.
	appendModel     func(dst []byte, m *ListedModel) []byte
	appendModelList func(dst []byte, models []ListedModel, rawQuery string) ([]byte, string)
	// outputLimit is the request member that bounds the answer's tokens, a
	// gjson path (Gemini's is nested); input holds the conversation.
	outputLimit, input string
}

var codecs = [...]codec{
	Chat: {
		request: func(dst []byte, s string, cfg *Config, _ Call) ([]byte, Request, *Error) {
			if cfg.Upstream == Messages {
				return chatToMessages(dst, s, cfg)
			}
			return passRequest(Chat, dst, s, cfg)
		},
		response: func(dst []byte, s string, upstream Format, _ Request, prefilled bool) []byte {
			if upstream == Messages {
				return messagesResponseToChat(dst, s, prefilled)
			}
			return passChatResponse(dst, s, prefilled)
		},
		appendError:     appendChatError,
		appendModel:     appendChatModel,
		appendModelList: appendChatModelList,
		outputLimit:     "max_tokens", input: "messages",
	},
	Messages: {
		request: func(dst []byte, s string, cfg *Config, _ Call) ([]byte, Request, *Error) {
			if cfg.Upstream == Chat {
				return messagesToChat(dst, s, cfg)
			}
			return passRequest(Messages, dst, s, cfg)
		},
		response: func(dst []byte, s string, upstream Format, _ Request, prefilled bool) []byte {
			if upstream == Chat {
				return chatResponseToMessages(dst, s, prefilled)
			}
			return passMessagesResponse(dst, s, prefilled)
		},
		appendError:     appendMessagesError,
		appendModel:     appendMessagesModel,
		appendModelList: appendMessagesModelList,
		outputLimit:     "max_tokens", input: "messages",
	},
	Responses: {
		request: func(dst []byte, s string, cfg *Config, _ Call) ([]byte, Request, *Error) {
			return responsesRequest(dst, s, cfg)
		},
		response: func(dst []byte, s string, upstream Format, req Request, prefilled bool) []byte {
			return responsesResponse(dst, s, upstream, &req, prefilled)
		},
		sink:            func(s *Stream) chatSink { return s.respSink() },
		comments:        true,
		appendError:     appendChatError, // the Responses API's errors have chat's shape
		appendModel:     appendChatModel,
		appendModelList: appendChatModelList,
		outputLimit:     "max_output_tokens", input: "input",
	},
	Gemini: {
		request: geminiRequest,
		response: func(dst []byte, s string, upstream Format, req Request, prefilled bool) []byte {
			return geminiResponse(dst, s, upstream, &req, prefilled)
		},
		sink:            func(s *Stream) chatSink { return s.geminiSink() },
		appendError:     appendGeminiError,
		appendModel:     appendGeminiModel,
		appendModelList: appendGeminiModelList,
		outputLimit:     "generationConfig.maxOutputTokens", input: "contents",
	},
}

// codecFor is f's row; ok is false for Unknown.
func codecFor(f Format) (*codec, bool) {
	if f == Unknown || int(f) >= len(codecs) {
		return nil, false
	}
	return &codecs[f], true
}

// ClientFormats are the formats clients speak, in the table's order.
func ClientFormats() []Format { return []Format{Chat, Messages, Responses, Gemini} }
