package caddymodule

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/timeblock/timeblock/translate"
)

func init() {
	caddy.RegisterModule(Translate{})
	httpcaddyfile.RegisterHandlerDirective("timeblock_translate", parseTranslate)
}

// Translate lets a client speak either format (chat completions or messages),
// or the Responses API, to an upstream that speaks chat completions or
// messages: it rewrites the request body and path and
// translates the response as it streams back. The translation itself lives
// in package translate; this is the glue to Caddy's request and response.
type Translate struct {
	// Upstream is the format the upstream speaks: "chat" or "messages".
	Upstream string `json:"upstream"`
	// Path is the upstream path requests are rewritten to (default
	// /v1/chat/completions for chat, /v1/messages for messages).
	Path string `json:"path,omitempty"`
	// Reasoning is how the reasoning control is written for the upstream:
	// openai (reasoning_effort), chat_template_kwargs (enable_thinking),
	// thinking (a thinking object) or effort_scale (reasoning_effort on the
	// scale in EffortScale). Default: openai for chat, thinking for messages.
	Reasoning string `json:"reasoning,omitempty"`
	// EffortScale is the effort scale of effort_scale, weakest first
	// (default low, high, max).
	EffortScale []string `json:"effort_scale,omitempty"`
	// ThinkPrefilled says the upstream's chat template opens <think> itself,
	// so the output of a reasoning request starts inside the reasoning.
	ThinkPrefilled bool `json:"think_prefilled,omitempty"`

	cfg     translate.Config
	maxBody int64
	logger  *zap.Logger
}

// CaddyModule returns the Caddy module information.
func (Translate) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.timeblock_translate",
		New: func() caddy.Module { return new(Translate) },
	}
}

// Provision fills defaults and builds the translation settings.
func (t *Translate) Provision(ctx caddy.Context) error {
	t.logger = ctx.Logger()
	up, err := translate.ParseFormat(t.Upstream)
	if err != nil {
		return fmt.Errorf("timeblock_translate: %w", err)
	}
	if t.Path == "" {
		t.Path = up.Path()
	}
	d, err := translate.ParseDialect(t.Reasoning)
	if err != nil {
		return fmt.Errorf("timeblock_translate: %w", err)
	}
	// The inference body limit is the timeblock app's, when there is one.
	t.maxBody = defaultMaxRequestBody
	if app, err := ctx.AppIfConfigured("timeblock"); err == nil {
		if a, ok := app.(*App); ok && a.MaxRequestBody > 0 {
			t.maxBody = a.MaxRequestBody
		}
	}
	t.cfg = translate.Config{
		Upstream:       up,
		Reasoning:      d,
		EffortScale:    t.EffortScale,
		ThinkPrefilled: t.ThinkPrefilled,
		MaxBodyBytes:   int(t.maxBody),
	}
	return nil
}

// Validate checks the options.
func (t *Translate) Validate() error {
	if t.Upstream != "chat" && t.Upstream != "messages" {
		return fmt.Errorf("timeblock_translate: upstream format must be chat or messages, got %q", t.Upstream)
	}
	if _, err := translate.ParseDialect(t.Reasoning); err != nil {
		return fmt.Errorf("timeblock_translate: %w", err)
	}
	if len(t.EffortScale) > 0 && t.Reasoning != "effort_scale" {
		return fmt.Errorf("timeblock_translate: an effort scale needs reasoning effort_scale, not %q", t.Reasoning)
	}
	if err := t.cfg.Validate(); err != nil && t.cfg.Upstream != translate.Unknown {
		return fmt.Errorf("timeblock_translate: %w", err)
	}
	return nil
}

// Cleanup releases nothing.
func (t *Translate) Cleanup() error { return nil }

// requestBody returns the body the gate left in VarBody (having read and
// checked it), or reads it here and makes it the forwarded body: checked
// is false then, and the caller releases fb as it returns.
func (t *Translate) requestBody(r *http.Request) (fb *forwardedBody, checked bool, err error) {
	if fb, ok := caddyhttp.GetVar(r.Context(), VarBody).(*forwardedBody); ok {
		return fb, true, nil
	}
	sb, err := readBody(r, t.maxBody)
	if err != nil {
		return nil, false, err
	}
	if sb == nil {
		sb = sharedBytes(nil)
	}
	return setBody(r, sb), false, nil
}

// readFailed answers a request whose body could not be read here, in the
// client's format.
func (t *Translate) readFailed(w http.ResponseWriter, client translate.Format, err error) error {
	var tooLarge *http.MaxBytesError
	switch {
	case errors.Is(err, errBodyTooLarge) || errors.As(err, &tooLarge):
		return translate.WriteError(w, client, http.StatusRequestEntityTooLarge, translate.RequestTooLarge,
			"request body is larger than "+strconv.FormatInt(t.maxBody, 10)+" bytes")
	case errors.Is(err, errBodyEncoded):
		return translate.WriteError(w, client, http.StatusUnsupportedMediaType, translate.InvalidRequest, err.Error())
	}
	return translate.WriteError(w, client, http.StatusBadRequest, translate.InvalidRequest,
		"could not read the request body: "+err.Error())
}

// ServeHTTP translates the request, sends it on, and translates the response.
func (t *Translate) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if isCountTokens(r.URL.Path) {
		return t.serveCountTokens(w, r, next) // translate_count.go
	}
	client := translate.FormatFromPath(r.URL.Path)
	if client == translate.Unknown {
		if model, m, ok := translate.ParseGeminiPath(r.URL.Path); ok && m == translate.GeminiCount {
			return t.serveGeminiCount(w, r, model) // translate_count.go
		}
	}
	if client == translate.Unknown || r.Method != http.MethodPost {
		return next.ServeHTTP(w, r) // not an inference call
	}
	fb, checked, err := t.requestBody(r)
	if err != nil {
		return t.readFailed(w, client, err)
	}
	if !checked {
		defer fb.release()
	}
	body := fb.Bytes()

	// The translated body is built in a pooled buffer (body_buffers.go). A
	// translation usually comes out about as long as what it translates.
	out := newSharedBody(len(body) + len(body)/4 + 512)
	call := translate.CallFromPath(client, r.URL.Path)
	// Boosted keys run first on a chat upstream: the gate decided how much
	// (it wrote it into a chat client's own body), and a chat body built
	// here from another format gets it from the translation.
	if client != translate.Chat && t.cfg.Upstream == translate.Chat {
		if n, ok := caddyhttp.GetVar(r.Context(), VarBoost).(int); ok {
			call.Boost = n
		}
	}
	// checked: by the gate, well-formed JSON, not too deep.
	built, req, terr := translate.TranslateCallRequest(client, call, body, &t.cfg, out.mem, checked)
	// A pass-through body usually comes out unchanged; then the one already
	// read goes on. Otherwise the new body replaces it, and the buffer of
	// the client's is free at once.
	if terr != nil || bytes.Equal(built, body) {
		out.release()
		if terr != nil {
			return terr.Write(w, client)
		}
	} else {
		out.fill(built)
		fb.replace(r, out)
	}
	r.URL.Path, r.URL.RawPath = t.Path, ""
	translate.DropRequestHints(r, client, t.cfg.Upstream)

	tw := fb.writer()
	*tw = translateWriter{
		ResponseWriterWrapper: caddyhttp.ResponseWriterWrapper{ResponseWriter: w},
		client:                client,
		upstream:              t.cfg.Upstream,
		req:                   req,
		cfg:                   &t.cfg,
	}
	// The response is read and rewritten here, so it must come uncompressed.
	fb.hdr.set(r.Header, "Accept-Encoding", "identity")
	if t.cfg.Upstream == translate.Messages && headerValue(r.Header, translate.MessagesVersionHeader) == "" {
		fb.hdr.set(r.Header, translate.MessagesVersionHeader, translate.MessagesVersion)
	}
	// reverse_proxy ends a response whose client left by panicking with
	// http.ErrAbortHandler, so finish does not run then: the header timer
	// is stopped however the handler ends, or it would flush a response
	// net/http has already closed, and crash the process.
	defer tw.endHold()
	// Also when reverse_proxy panics on a client that left: the tokens
	// seen until then count.
	defer tw.noteUsage(fb)
	err = next.ServeHTTP(tw, r)
	if ferr := tw.finish(err); ferr != nil && err == nil {
		err = ferr
	}
	if tw.dropped > 0 {
		t.logger.Warn("the upstream called tools without a name; those calls were left out of the answer",
			zap.Int("calls", tw.dropped), zap.String("path", r.URL.Path))
	}
	if err != nil && tw.mode == modeStream && tw.wroteHeader {
		// The client already has a stream, closed now with an error event;
		// Caddy's error handling could only write a second response.
		t.logger.Warn("upstream failed mid-stream", zap.Error(err))
		return nil
	}
	return err
}

func parseTranslate(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	t := new(Translate)
	err := t.UnmarshalCaddyfile(h.Dispenser)
	return t, err
}

// UnmarshalCaddyfile parses:
//
//	timeblock_translate chat|messages {
//		path <upstream path>
//		reasoning openai|chat_template_kwargs|thinking|effort_scale [<scale>...]
//		think_prefilled [true|false]
//	}
func (t *Translate) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // directive name
	if !d.NextArg() {
		return d.Err("timeblock_translate needs the format the upstream speaks: chat or messages")
	}
	t.Upstream = d.Val()
	if t.Upstream != "chat" && t.Upstream != "messages" {
		return d.Errf("unknown upstream format %q (use chat or messages)", t.Upstream)
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "path":
			if err := singleArg(d, &t.Path); err != nil {
				return err
			}
			if len(t.Path) == 0 || t.Path[0] != '/' {
				return d.Errf("path must start with /, got %q", t.Path)
			}
		case "reasoning":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.Err("reasoning needs a dialect: openai, chat_template_kwargs, thinking or effort_scale")
			}
			if _, err := translate.ParseDialect(args[0]); err != nil {
				return d.Errf("reasoning: %v", err)
			}
			t.Reasoning = args[0]
			if len(args) > 1 {
				if args[0] != "effort_scale" {
					return d.Errf("reasoning %s takes no scale; only effort_scale does (e.g. effort_scale low high max)", args[0])
				}
				t.EffortScale = args[1:]
			}
		case "think_prefilled":
			t.ThinkPrefilled = true
			if d.NextArg() {
				v, err := strconv.ParseBool(d.Val())
				if err != nil {
					return d.Errf("think_prefilled: %q is not true or false", d.Val())
				}
				t.ThinkPrefilled = v
			}
			if d.NextArg() {
				return d.ArgErr()
			}
		default:
			return d.Errf("unknown timeblock_translate option %q", d.Val())
		}
	}
	return nil
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Translate)(nil)
	_ caddy.Validator             = (*Translate)(nil)
	_ caddy.CleanerUpper          = (*Translate)(nil)
	_ caddyhttp.MiddlewareHandler = (*Translate)(nil)
	_ caddyfile.Unmarshaler       = (*Translate)(nil)
)
