package translate

// The reasoning control: both endpoints accept thinking {type, budget_tokens}
// and reasoning_effort (chat clients also OpenRouter's reasoning {effort,
// enabled, max_tokens} and chat_template_kwargs.enable_thinking); the
// translators resolve them into one intent and write it in the upstream's
// dialect. Off, and omitted (the API's default is no reasoning), remove every
// reasoning field; only the chat_template_kwargs dialect writes an explicit
// enable_thinking false, because hybrid templates think unless told not to.
//
// Today's messages clients (Claude Code) send thinking {type: adaptive,
// display?} with output_config.effort: adaptive turns reasoning on, at the
// effort asked (high when none is, the messages API's default), and an
// effort alone sets the level without turning reasoning on (as in that API,
// where it also shapes answers without thinking). To a messages upstream in
// the thinking dialect such a request passes unchanged (passThinking);
// display (summarized or omitted) rides along on a thinking object written
// for a messages upstream and is dropped on a chat upstream, which returns
// the reasoning in full.

type effort uint8

const (
	effUnset effort = iota
	effLow
	effMedium
	effHigh
	effMax
)

// reasoning is the client's reasoning intent, gathered member by member.
type reasoning struct {
	// per source: 0 not given, 1 on, -1 off
	thinking, effortSrc, orSrc, kwargs int8
	effort                             effort
	budget                             int64
	// kwargsRest holds the client's other chat_template_kwargs members, raw.
	kwargsRest string
	// thinkingRaw is the client's thinking member and display its display
	// member, raw; adaptive says its type is adaptive.
	thinkingRaw, display string
	adaptive             bool
	// outEffort is output_config.effort, the level when no other source
	// sets one.
	outEffort effort
	on        bool
	set       bool
}

// member consumes the top-level member k if it is a reasoning field. chat
// says the client speaks chat (which may also use reasoning and
// chat_template_kwargs).
func (r *reasoning) member(k, v string, chat bool) (bool, *Error) {
	switch k {
	case "thinking":
		return true, r.parseThinking(v)
	case "reasoning_effort":
		if isNull(v) {
			return true, nil
		}
		on, e, err := parseEffort(v, "reasoning_effort")
		if err != nil {
			return true, err
		}
		r.effortSrc, r.effort = on, e
		return true, nil
	case "reasoning":
		if !chat {
			return false, nil
		}
		return true, r.parseOpenRouter(v)
	case "chat_template_kwargs":
		if !chat {
			return false, nil
		}
		return true, r.parseKwargs(v)
	}
	return false, nil
}

func (r *reasoning) parseThinking(v string) *Error {
	switch {
	case isNull(v):
		return nil
	case v == "true":
		r.thinking = 1
		return nil
	case v == "false":
		r.thinking = -1
		return nil
	case !isObj(v):
		return badRequest("thinking: must be an object {type: enabled|adaptive|disabled, budget_tokens?, display?}")
	}
	r.thinkingRaw = v
	it, _ := objIter(v)
	var typ string
	for {
		k, val, ok := it.next()
		if !ok {
			break
		}
		switch k {
		case "type":
			if !isStr(val) {
				return badRequest("thinking.type: must be a string (enabled, adaptive or disabled)")
			}
			typ = inner(val)
		case "display":
			if isNull(val) {
				continue
			}
			if !isStr(val) {
				return badRequest("thinking.display: must be a string (summarized or omitted)")
			}
			r.display = val
		case "budget_tokens":
			if isNull(val) {
				continue
			}
			n, ok := toInt(val)
			if !ok || n < 0 {
				return badRequest("thinking.budget_tokens: must be a non-negative integer")
			}
			r.budget = n
		}
	}
	switch typ {
	case "enabled":
		r.thinking = 1
	case "adaptive":
		r.thinking = 1
		r.adaptive = true
	case "disabled":
		r.thinking = -1
	case "":
		if r.budget > 0 {
			r.thinking = 1
		} else {
			return badRequest("thinking.type: required (enabled, adaptive or disabled)")
		}
	default:
		return badRequest("thinking.type: must be enabled, adaptive or disabled, got " + typ)
	}
	return nil
}

func parseEffort(v, path string) (int8, effort, *Error) {
	if isStr(v) {
		switch inner(v) {
		case "none":
			return -1, effUnset, nil
		case "minimal", "low":
			return 1, effLow, nil
		case "medium":
			return 1, effMedium, nil
		case "high":
			return 1, effHigh, nil
		case "xhigh", "max":
			return 1, effMax, nil
		}
	}
	return 0, effUnset, badRequest(path + ": must be one of none, low, medium, high, max")
}

// outputEffort reads output_config.effort (low, medium, high, xhigh, max).
func (r *reasoning) outputEffort(v string) *Error {
	if isNull(v) {
		return nil
	}
	on, e, err := parseEffort(v, "output_config.effort")
	if err != nil || on < 0 {
		return badRequest("output_config.effort: must be one of low, medium, high, xhigh, max")
	}
	r.outEffort = e
	return nil
}

// passThinking says the client's own thinking member goes to the upstream
// unchanged: a messages client's adaptive thinking, to a messages upstream
// in the thinking dialect, with no reasoning_effort to fold in.
func (r *reasoning) passThinking(cfg *Config) bool {
	return r.adaptive && r.effortSrc == 0 && cfg.Upstream == Messages && cfg.Dialect() == DialectThinking
}

func (r *reasoning) parseOpenRouter(v string) *Error {
	if isNull(v) {
		return nil
	}
	if !isObj(v) {
		return badRequest("reasoning: must be an object {effort?, enabled?, max_tokens?}")
	}
	it, _ := objIter(v)
	for {
		k, val, ok := it.next()
		if !ok {
			return nil
		}
		switch k {
		case "effort":
			if isNull(val) {
				continue
			}
			on, e, err := parseEffort(val, "reasoning.effort")
			if err != nil {
				return err
			}
			r.orSrc = on
			if e != effUnset {
				r.effort = e
			}
		case "enabled":
			if !isBool(val) {
				return badRequest("reasoning.enabled: must be a boolean")
			}
			if val == "true" {
				if r.orSrc == 0 {
					r.orSrc = 1
				}
			} else {
				r.orSrc = -1
			}
		case "max_tokens":
			if isNull(val) {
				continue
			}
			n, ok := toInt(val)
			if !ok || n < 0 {
				return badRequest("reasoning.max_tokens: must be a non-negative integer")
			}
			if r.budget == 0 {
				r.budget = n
			}
			if r.orSrc == 0 {
				r.orSrc = 1
			}
		}
	}
}

func (r *reasoning) parseKwargs(v string) *Error {
	if isNull(v) {
		return nil
	}
	if !isObj(v) {
		return badRequest("chat_template_kwargs: must be an object")
	}
	it, _ := objIter(v)
	for {
		k, val, ok := it.next()
		if !ok {
			break
		}
		if k == "enable_thinking" || k == "thinking" {
			if !isBool(val) {
				return badRequest("chat_template_kwargs." + k + ": must be a boolean")
			}
			if val == "true" {
				r.kwargs = 1
			} else {
				r.kwargs = -1
			}
		}
	}
	r.kwargsRest = v
	return nil
}

// resolve settles the intent from the gathered sources.
func (r *reasoning) resolve() *Error {
	on, off := false, false
	for _, s := range [...]int8{r.thinking, r.effortSrc, r.orSrc, r.kwargs} {
		switch s {
		case 1:
			on = true
		case -1:
			off = true
		}
	}
	if on && off {
		return badRequest("conflicting reasoning settings: one of thinking, reasoning_effort, reasoning or chat_template_kwargs turns reasoning on and another turns it off")
	}
	r.set = on || off
	r.on = on
	if r.effort == effUnset {
		r.effort = r.outEffort
	}
	if on && r.adaptive && r.effort == effUnset && r.budget == 0 {
		r.effort = effHigh // the messages API's default effort
	}
	return nil
}

var effortBudget = [...]int64{effUnset: 8192, effLow: 2048, effMedium: 8192, effHigh: 16384, effMax: 32768}

// effortShare is the most of max_tokens (in percent) an effort may spend thinking.
var effortShare = [...]int64{effUnset: 50, effLow: 25, effMedium: 50, effHigh: 75, effMax: 90}

func budgetEffort(b int64) effort {
	switch {
	case b < 4096:
		return effLow
	case b < 12288:
		return effMedium
	case b < 24576:
		return effHigh
	}
	return effMax
}

const minBudget = 1024

// fix settles the thinking budget against max_tokens (0 when unknown): the
// budget stays at least 1024 and below max_tokens; when max_tokens is 1024
// or less, max_tokens is raised just above the budget, because a thinking
// upstream rejects the request otherwise (the answer may then be cut short,
// as the API says of small max_tokens with reasoning on).
func (r *reasoning) fix(d Dialect, maxTokens *int64) {
	if !r.on || d != DialectThinking {
		return
	}
	b := r.budget
	if b == 0 {
		// From an effort: a fixed size, but never more than a share of
		// max_tokens, so the answer keeps room.
		b = effortBudget[r.effort]
		if *maxTokens > 0 {
			b = min(b, *maxTokens*effortShare[r.effort]/100)
		}
	}
	if b < minBudget {
		b = minBudget
	}
	if *maxTokens > 0 && b >= *maxTokens {
		if *maxTokens > minBudget {
			b = *maxTokens - 1
		} else {
			b = minBudget
			*maxTokens = minBudget + 1
		}
	}
	r.budget = b
}

func (r *reasoning) level() effort {
	if r.effort != effUnset {
		return r.effort
	}
	if r.budget > 0 {
		return budgetEffort(r.budget)
	}
	return effMedium
}

var openAIEffort = [...]string{effUnset: "medium", effLow: "low", effMedium: "medium", effHigh: "high", effMax: "high"}

// appendPivot writes r into a chat request built from another client format
// (Responses, Gemini): in the upstream's dialect when the request goes
// upstream as it is (final), else as a chat client would write it, for the
// chat → messages translation that follows: reasoning_effort, or thinking
// when a budget was given.
func (r *reasoning) appendPivot(dst []byte, cfg *Config, final bool) []byte {
	switch {
	case final:
		return r.appendReasoning(dst, cfg, true)
	case !r.set:
		return dst
	case !r.on:
		return append(dst, `,"reasoning_effort":"none"`...)
	case r.budget > 0:
		dst = append(dst, `,"thinking":{"type":"enabled","budget_tokens":`...)
		dst = appendInt(dst, r.budget)
		return append(dst, '}')
	}
	dst = append(dst, `,"reasoning_effort":"`...)
	dst = append(dst, [...]string{effUnset: "medium", effLow: "low", effMedium: "medium", effHigh: "high", effMax: "max"}[r.effort]...)
	return append(dst, '"')
}

// appendChatLimits writes the output limit and, for a streamed request,
// stream (and, going upstream as it is, the usage chunk asked for) into a
// chat request built from another client format.
func appendChatLimits(dst []byte, maxTokens int64, stream, final bool) []byte {
	if maxTokens > 0 {
		dst = append(dst, `,"max_tokens":`...)
		dst = appendInt(dst, maxTokens)
	}
	if stream {
		dst = append(dst, `,"stream":true`...)
		if final {
			dst = append(dst, `,"stream_options":{"include_usage":true}`...)
		}
	}
	return dst
}

// appendReasoning writes the intent in dialect d. chatUp says the upstream
// speaks chat (chat_template_kwargs the client sent ride along only there).
func (r *reasoning) appendReasoning(dst []byte, cfg *Config, chatUp bool) []byte {
	d := cfg.Dialect()
	if d == DialectChatTemplateKwargs || (chatUp && r.kwargsRest != "") {
		dst = r.appendKwargs(dst, d == DialectChatTemplateKwargs)
	}
	if !r.on {
		return dst
	}
	switch d {
	case DialectOpenAI:
		dst = key(dst, "reasoning_effort")
		dst = appendStr(dst, openAIEffort[r.level()])
	case DialectEffortScale:
		sc := cfg.scale()
		lvl := int(r.level()) - 1 // 0..3
		i := (lvl*(len(sc)-1)*2 + 3) / 6
		if i >= len(sc) {
			i = len(sc) - 1
		}
		dst = key(dst, "reasoning_effort")
		dst = appendStr(dst, sc[i])
	case DialectThinking:
		dst = key(dst, "thinking")
		dst = append(dst, `{"type":"enabled","budget_tokens":`...)
		dst = appendInt(dst, r.budget)
		if r.display != "" && !chatUp {
			dst = append(dst, `,"display":`...)
			dst = append(dst, r.display...)
		}
		dst = append(dst, '}')
	}
	return dst
}

// appendKwargs writes chat_template_kwargs: the client's other members, and
// enable_thinking when the dialect is chat_template_kwargs.
func (r *reasoning) appendKwargs(dst []byte, withSwitch bool) []byte {
	mark := len(dst)
	dst = key(dst, "chat_template_kwargs")
	dst = append(dst, '{')
	body := len(dst)
	if it, ok := objIter(r.kwargsRest); ok {
		for {
			k, v, ok := it.next()
			if !ok {
				break
			}
			if k == "enable_thinking" || k == "thinking" {
				continue
			}
			dst = appendRawMember(dst, k, v)
		}
	}
	if withSwitch {
		dst = key(dst, "enable_thinking")
		if r.on {
			dst = append(dst, "true"...)
		} else {
			dst = append(dst, "false"...)
		}
	}
	if len(dst) == body {
		return dst[:mark]
	}
	return append(dst, '}')
}
