// Package translate converts inference traffic between the wire formats
// Timeblock serves. Clients speak chat completions, messages, the OpenAI
// Responses API or the Gemini API; upstreams speak chat completions or
// messages. Every client works with every upstream, requests and answers,
// streamed and whole, with the uniform reasoning control applied on the way
// up and reasoning normalised on the way down. It imports no Caddy package.
//
// # The codec table
//
// What the package knows of a client format is one row of the table in
// codec.go: how its request becomes the upstream's (request), how the
// upstream's whole answer becomes its own (response), how its stream is
// written (sink), its error body, its model list, and the names of its
// output limit and conversation fields. The exported entry points look the
// client's row up; nothing else picks a writer by the client's format.
//
//	format     request                    whole answer            stream
//	chat       request_pass.go,           response.go             stream_emit.go
//	           request_chat_to_messages.go
//	messages   request_pass.go,           response.go             stream_emit.go
//	           request_messages_to_chat.go
//	responses  responses_request.go       responses_response.go   sink: responses_stream.go
//	           (→ chat, → messages)
//	gemini     gemini_request.go          gemini_response.go      sink: gemini_stream.go
//	           (→ chat, → messages)
//
// Upstream streams are read by stream_from_chat.go and
// stream_from_messages.go, which feed the direct writers (stream_emit.go)
// or, for a sink's client, the inner chat stream. The Responses and Gemini
// readers are in files by concern (responses_tools.go, responses_input.go,
// responses_runs.go; gemini_config.go, gemini_contents.go, gemini_media.go,
// gemini_tools.go).
//
// Chat completions is the pivot. The chat and messages rows translate
// directly between each other: those four pairs are the traffic that
// matters, and their direct readers and writers are what the allocation
// guards and docs/performance.md measure. A newer client format reads its
// request into a chat request (the neutral form: the richest of the two
// upstream formats, and the one the reasoning control and the field rule
// already speak), which goes upstream as it is or through chat → messages.
// Its answers are written from chat: a whole messages answer is read as
// chat first, and a stream runs an inner chat Stream (pivot.go) whose
// normalised chunks — reasoning split out, tool calls numbered, nameless
// calls dropped, usage asked for — feed the format's chatSink. A chunk the
// inner pass-through already read for the sink (its view, stream_view.go)
// is not read again.
//
// # Adding a client format
//
//  1. A Format constant (format.go) and, when its path says more than the
//     body (the Gemini model), what CallFromPath reads from it.
//  2. A request reader writing a chat request: the members it takes, the
//     ones it drops as hints and the ones it refuses (the field rule,
//     fields.go), with errors naming the member's path.
//  3. A whole-answer writer from a chat completion, and a chatSink for the
//     stream: chunk, final, fail.
//  4. Its error body, model list and output-limit field.
//  5. One row in codecs. The Caddy glue then routes it by path and asks
//     this package for the rest (Format.OutputLimitField, AppendModelList,
//     Error.AppendBody, DropRequestHints).
//
// Gemini was added so: gemini_*.go, the row, and the glue's routes.
//
// # Bytes, not structs
//
// Requests and answers are read in place, without allocating, and written
// by appending into caller-provided buffers, so the Caddy glue can pool
// them. The readers: the cursor (walk.go), a one-pass pull reader, for
// requests, whole answers, token counts and, checked (validating what it
// reads in the same pass), upstream stream events (chunk_read.go and the
// stream readers); iter (json.go) for small values read member by member;
// the scanner (scan.go) that checks a body is JSON; gjson for the odd deep
// lookup.
//
// Entry points:
//
//   - TranslateRequest rewrites a client body into the upstream's format;
//     TranslateValidRequest does the same for a body already checked to be
//     well-formed JSON (the gate's), skipping that pass; TranslateCallRequest
//     takes what a Gemini path says.
//   - TranslateResponse rewrites a whole (non-streaming) upstream response.
//   - NewStream returns a Stream that rewrites upstream SSE bytes as they
//     arrive, in chunks of any size.
//   - TranslateErrorBody and Error render error bodies in any format.
//   - CountTokens and CountGeminiTokens estimate a prompt's tokens.
package translate
