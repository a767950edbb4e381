package translate

// The request fields that bound how many tokens an answer may hold, by
// format, so that whoever caps them (the gate, to a pool's ceiling) need
// not know each format's names.

import "strings"

// MaxCompletionTokensField is chat's newer name for max_tokens. The gate caps
// it in a body of any format, as it does OutputLimitField.
const MaxCompletionTokensField = "max_completion_tokens"

// OutputLimitField names the field of a request in format f that bounds the
// output tokens, as a gjson path: max_output_tokens in the Responses API,
// generationConfig.maxOutputTokens in Gemini's, max_tokens in chat and
// messages.
func (f Format) OutputLimitField() string {
	if c, ok := codecFor(f); ok {
		return c.outputLimit
	}
	return "max_tokens"
}

// InputField names the member of a request in format f that holds the
// conversation: input in the Responses API, contents in Gemini's, messages
// in chat and messages.
func (f Format) InputField() string {
	if c, ok := codecFor(f); ok {
		return c.input
	}
	return "messages"
}

// OutputLimitIn finds the output limit of a request in format f in its
// top-level member k (its name unquoted, unescaped) whose raw value is v:
// the gjson path it is at, as the body spells it, and its raw value. ok is
// false when k does not hold it. The Gemini API nests it
// (generationConfig.maxOutputTokens) and takes snake_case names as well.
func (f Format) OutputLimitIn(k, v string) (path, raw string, ok bool) {
	limit := f.OutputLimitField()
	member, inner, nested := strings.Cut(limit, ".")
	if f == Gemini {
		if geminiKey(k) != member || !isObj(v) {
			return "", "", false
		}
		scanMembers(v, DefaultMaxDepth, func(name, val string) {
			name = name[1 : len(name)-1]
			if !ok && geminiKey(name) == inner {
				path, raw, ok = k+"."+name, val, true
			}
		})
		return path, raw, ok
	}
	if k != member || nested {
		return "", "", false
	}
	return k, v, true
}
