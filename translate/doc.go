// Package translate converts inference traffic between the two wire formats
// Timeblock serves — chat completions and messages — in both directions,
// request and response, streaming and not, and applies the uniform reasoning
// control on the way up and the reasoning normalisation on the way down.
// The OpenAI Responses API is a third client format, translated through chat
// completions to either upstream (responses_*.go).
//
// It works on bytes: requests and responses are read with a small allocation
// free scanner (gjson for validation and the odd deep lookup) and written by
// appending into caller-provided buffers, so the Caddy glue can pool them.
// It imports no Caddy package.
//
// Entry points:
//
//   - TranslateRequest rewrites a client body into the upstream's format;
//     TranslateValidRequest does the same for a body already checked to be
//     well-formed JSON (the gate's), skipping that pass.
//   - TranslateResponse rewrites a whole (non-streaming) upstream response.
//   - NewStream returns a Stream that rewrites upstream SSE bytes as they
//     arrive, in chunks of any size.
//   - TranslateErrorBody and Error render error bodies in either format.
package translate
