package translate

import "strings"

// The field rule: what happens to a request member that a translation cannot
// carry into the upstream's format. It is written once, here, and every
// request translator applies it through uncarried (or uncarriedIn) to each
// member it does not carry itself:
//
//   - A hint — caching, context management, metadata, betas, service tiers,
//     user ids, prompt cache keys, store flags, sampling penalties — changes
//     nothing a client relies on. It is dropped.
//   - A field that changes a result the client relies on — an output format
//     the upstream cannot enforce, tool semantics, server-side tools, n > 1,
//     log probabilities, audio — is refused: a 400 invalid_request_error
//     whose message names the field and says what to do. Sent at its neutral
//     value (n: 1, logprobs: false, an empty logit_bias, null) it asks for
//     nothing and is dropped.
//   - A field nobody has classified is dropped on translation: clients add
//     fields with every release, and refusing what we do not know would break
//     them on their next update.
//
// To an upstream that speaks the client's own format nothing is translated:
// every member passes unchanged, classified or not, except the server-side
// ones (fieldServer), which no upstream here can run and which are refused
// on every path (passField).
//
// Names are member names, dotted for nested ones ("output_config.format",
// "tools.defer_loading"); array indexes are left out of the name and kept in
// the path a refusal reports. Members of content blocks (system blocks
// included) that a translation does not carry — cache_control, citations, a
// thinking block's signature — are hints and are not looked up; a block
// type that cannot be carried is refused by the translator itself.

// fieldAction is what a translation does with a member it cannot carry.
type fieldAction uint8

const (
	// fieldHint is dropped.
	fieldHint fieldAction = iota
	// fieldRefuse is refused unless its value is neutral.
	fieldRefuse
	// fieldServer belongs to server-side tools: refused unless neutral, on
	// translation and on pass-through alike.
	fieldServer
)

// fieldRule classifies one member of one client format's requests.
type fieldRule struct {
	client Format
	name   string
	action fieldAction
	// neutral reports a value that asks for nothing beyond the default, so a
	// refused field with it is dropped instead. Null always is; nil means
	// only null.
	neutral func(v string) bool
	// fix follows "<path>: " in a refusal: why, and what to do instead.
	fix string
}

// fieldRules is the table. Members a translator carries (model, messages,
// tools, stop sequences, sampling, reasoning...) are not listed: the
// translators handle them. Two rows (metadata, thinking.display) state what
// the translator does with a member it reads itself. Responses and Gemini
// clients are translated through the chat translation, so the Chat rows
// apply to them too after their own.
var fieldRules = [...]fieldRule{
	// Messages clients (to a chat upstream).
	{client: Messages, name: "metadata", action: fieldHint},           // but user_id, carried as user
	{client: Messages, name: "context_management", action: fieldHint}, // the upstream keeps no context
	{client: Messages, name: "cache_control", action: fieldHint},      // prompt caching, top level
	{client: Messages, name: "tools.cache_control", action: fieldHint},
	{client: Messages, name: "tools.defer_loading", action: fieldHint}, // the tool is simply always loaded
	{client: Messages, name: "tools.input_examples", action: fieldHint},
	{client: Messages, name: "tools.eager_input_streaming", action: fieldHint},
	{client: Messages, name: "service_tier", action: fieldHint},
	{client: Messages, name: "inference_geo", action: fieldHint},
	{client: Messages, name: "speed", action: fieldHint},
	{client: Messages, name: "diagnostics", action: fieldHint},
	// Claude Code's auto mode (interactive sessions, the first request of
	// a turn) asks Anthropic's API to screen the tool calls it returns
	// (type dangerous_tool_use); no model server screens them. Claude Code's
	// own permission rules still apply to every call.
	{client: Messages, name: "safeguards", action: fieldHint},
	{client: Messages, name: "thinking.display", action: fieldHint}, // reasoning is returned in full
	{client: Messages, name: "output_config.format", action: fieldRefuse, // json_schema is carried
		fix: "only {type: json_schema, schema} can be enforced on this model's upstream; describe other formats in the prompt"},
	{client: Messages, name: "output_format", action: fieldRefuse, // the beta's spelling; json_schema is carried
		fix: "only {type: json_schema, schema} can be enforced on this model's upstream; describe other formats in the prompt"},
	{client: Messages, name: "mcp_servers", action: fieldServer, neutral: isEmptyArr,
		fix: "MCP servers are server-side tools, which are not supported; connect them in your client and offer their tools as client tools"},
	{client: Messages, name: "container", action: fieldServer,
		fix: "server-side code execution containers are not supported; leave container out"},

	// Chat clients (to a messages upstream).
	{client: Chat, name: "seed", action: fieldHint},
	{client: Chat, name: "frequency_penalty", action: fieldHint},
	{client: Chat, name: "presence_penalty", action: fieldHint},
	{client: Chat, name: "store", action: fieldHint},
	{client: Chat, name: "metadata", action: fieldHint},
	{client: Chat, name: "service_tier", action: fieldHint},
	{client: Chat, name: "prompt_cache_key", action: fieldHint},
	{client: Chat, name: "prompt_cache_retention", action: fieldHint},
	{client: Chat, name: "safety_identifier", action: fieldHint},
	{client: Chat, name: "verbosity", action: fieldHint},
	{client: Chat, name: "prediction", action: fieldHint}, // a latency optimisation only
	{client: Chat, name: "n", action: fieldRefuse, neutral: isOne,
		fix: "this model's upstream returns one choice per request; send n=1 or leave it out"},
	{client: Chat, name: "logprobs", action: fieldRefuse, neutral: isFalse,
		fix: "this model's upstream does not return log probabilities; leave logprobs out"},
	{client: Chat, name: "top_logprobs", action: fieldRefuse, neutral: isZero,
		fix: "this model's upstream does not return log probabilities; leave top_logprobs out"},
	{client: Chat, name: "response_format", action: fieldRefuse, neutral: isTextFormat, // json_schema is carried
		fix: "this model's upstream can enforce only a JSON schema: send {type: json_schema, json_schema: {name, schema}}, or describe the format in the prompt"},
	{client: Chat, name: "logit_bias", action: fieldRefuse, neutral: isEmptyObj,
		fix: "this model's upstream does not support logit_bias; leave it out"},
	{client: Chat, name: "audio", action: fieldRefuse,
		fix: "audio output is not supported; leave audio out"},
	{client: Chat, name: "modalities", action: fieldRefuse, neutral: isTextOnly,
		fix: "only text output is supported; ask for [\"text\"] or leave modalities out"},
	{client: Chat, name: "functions", action: fieldRefuse,
		fix: "legacy functions are not supported; use tools and tool_choice"},
	{client: Chat, name: "function_call", action: fieldRefuse,
		fix: "legacy functions are not supported; use tools and tool_choice"},
	{client: Chat, name: "web_search_options", action: fieldServer,
		fix: "server-side web search is not supported; leave web_search_options out"},

	// Responses clients (before their chat translation). Helper C's
	// translator owns these rows; adjust them there.
	{client: Responses, name: "store", action: fieldHint}, // nothing is stored either way
	{client: Responses, name: "metadata", action: fieldHint},
	{client: Responses, name: "client_metadata", action: fieldHint},
	{client: Responses, name: "prompt_cache_key", action: fieldHint},
	{client: Responses, name: "prompt_cache_retention", action: fieldHint},
	{client: Responses, name: "service_tier", action: fieldHint},
	{client: Responses, name: "user", action: fieldHint},
	{client: Responses, name: "safety_identifier", action: fieldHint},
	{client: Responses, name: "truncation", action: fieldHint},
	{client: Responses, name: "text.verbosity", action: fieldHint},
	{client: Responses, name: "stream_options", action: fieldHint},     // obfuscation padding only
	{client: Responses, name: "max_tool_calls", action: fieldHint},     // counts hosted tool calls, which never run here
	{client: Responses, name: "context_management", action: fieldHint}, // the upstream keeps no context
	{client: Responses, name: "previous_response_id", action: fieldRefuse,
		fix: "Timeblock keeps no response state; send the whole conversation in input (store: false)"},
	{client: Responses, name: "conversation", action: fieldRefuse,
		fix: "Timeblock keeps no conversation state; send the whole conversation in input"},
	{client: Responses, name: "background", action: fieldRefuse, neutral: isFalse,
		fix: "background responses are not supported; send background: false or leave it out"},
	{client: Responses, name: "prompt", action: fieldRefuse,
		fix: "stored prompt templates are not supported; send instructions and input instead"},
	{client: Responses, name: "top_logprobs", action: fieldRefuse, neutral: isZero,
		fix: "this model's upstream does not return log probabilities; leave top_logprobs out"},

	// Gemini clients (before their chat translation; gemini_request.go reads
	// snake_case names as their lowerCamelCase spelling, the one listed).
	{client: Gemini, name: "safetySettings", action: fieldHint}, // no safety filters run here
	{client: Gemini, name: "labels", action: fieldHint},         // billing labels
	{client: Gemini, name: "cachedContent", action: fieldRefuse,
		fix: "Timeblock keeps no cached content; send the whole conversation in contents"},
	{client: Gemini, name: "generationConfig.candidateCount", action: fieldRefuse, neutral: isOne,
		fix: "this model's upstream returns one candidate per request; send candidateCount 1 or leave it out"},
	{client: Gemini, name: "generationConfig.responseModalities", action: fieldRefuse, neutral: isGeminiTextOnly,
		fix: "only text output is supported; ask for [\"TEXT\"] or leave responseModalities out"},
	{client: Gemini, name: "generationConfig.speechConfig", action: fieldRefuse,
		fix: "audio output is not supported; leave speechConfig out"},
	{client: Gemini, name: "generationConfig.responseLogprobs", action: fieldRefuse, neutral: isFalse,
		fix: "this model's upstream does not return log probabilities; leave responseLogprobs out"},
	{client: Gemini, name: "generationConfig.logprobs", action: fieldRefuse, neutral: isZero,
		fix: "this model's upstream does not return log probabilities; leave logprobs out"},
	{client: Gemini, name: "generationConfig.mediaResolution", action: fieldHint}, // how finely images are read
	{client: Gemini, name: "generationConfig.audioTimestamp", action: fieldHint},  // audio input only
	{client: Gemini, name: "generationConfig.enableEnhancedCivicAnswers", action: fieldHint},
	{client: Gemini, name: "generationConfig.routingConfig", action: fieldHint}, // Google's model routing
	{client: Gemini, name: "generationConfig.modelSelectionConfig", action: fieldHint},
	{client: Gemini, name: "generationConfig.imageConfig", action: fieldHint}, // image output is refused by responseModalities
	{client: Gemini, name: "toolConfig.retrievalConfig", action: fieldHint},   // a location for server-side grounding
	{client: Gemini, name: "toolConfig.includeServerSideToolInvocations", action: fieldHint},
}

// fieldKey indexes the table: a nested rule's name is split at its last
// dot, so that a translator looks a member up without joining strings.
type fieldKey struct {
	client       Format
	parent, name string
}

var fieldIndex = func() map[fieldKey]*fieldRule {
	m := make(map[fieldKey]*fieldRule, len(fieldRules))
	for i := range fieldRules {
		r := &fieldRules[i]
		k := fieldKey{client: r.client, name: r.name}
		if j := strings.LastIndexByte(r.name, '.'); j >= 0 {
			k.parent, k.name = r.name[:j], r.name[j+1:]
		}
		if _, dup := m[k]; dup {
			panic("translate: field rule listed twice: " + r.client.String() + " " + r.name)
		}
		m[k] = r
	}
	return m
}()

func lookupField(client Format, parent, name string) *fieldRule {
	return fieldIndex[fieldKey{client, parent, name}]
}

// uncarried applies the field rule to the top-level member name (value v)
// of a client request that the translation to another format does not
// carry: nil means drop it, an error refuses the request.
func uncarried(client Format, name, v string) *Error {
	return uncarriedIn(client, "", -1, name, v)
}

// uncarriedIn is uncarried for the member name of a nested object: parent
// is the rule's prefix ("tools", "output_config") and index the element of
// the parent array it is in (-1 when the parent is an object), which only
// the refusal's path shows ("tools.3.defer_loading").
func uncarriedIn(client Format, parent string, index int, name, v string) *Error {
	if isNull(v) {
		return nil
	}
	r := lookupField(client, parent, name)
	if r == nil || r.action == fieldHint || (r.neutral != nil && r.neutral(v)) {
		return nil
	}
	return r.refuse(parent, index, name)
}

func (r *fieldRule) refuse(parent string, index int, name string) *Error {
	path := name
	switch {
	case parent != "" && index >= 0:
		path = pathi(parent, index) + "." + name
	case parent != "":
		path = parent + "." + name
	}
	return badRequest(path + ": " + r.fix)
}

// passField applies the rule on pass-through, to an upstream that speaks the
// client's format: every top-level member passes but server-side ones.
func passField(client Format, name, v string) *Error {
	if isNull(v) {
		return nil
	}
	if r := lookupField(client, "", name); r != nil && r.action == fieldServer && (r.neutral == nil || !r.neutral(v)) {
		return r.refuse("", -1, name)
	}
	return nil
}

// Neutral values.

func isOne(v string) bool      { n, ok := toInt(v); return ok && n == 1 }
func isZero(v string) bool     { n, ok := toInt(v); return ok && n == 0 }
func isFalse(v string) bool    { return v == "false" }
func isEmptyObj(v string) bool { return trimJSON(v) == "{}" }
func isEmptyArr(v string) bool { return trimJSON(v) == "[]" }

// isTextFormat: response_format {type: text} is the default.
func isTextFormat(v string) bool { return strEq(field(v, "type"), "text") }

// isTextOnly: modalities that ask for text alone (anything but an array is
// left to the upstream, as before).
func isTextOnly(v string) bool {
	it, ok := arrIter(v)
	if !ok {
		return true
	}
	for {
		e, ok := it.elem()
		if !ok {
			return true
		}
		if !strEq(e, "text") {
			return false
		}
	}
}
