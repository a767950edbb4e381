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
// top-level member k (its name unquoted, unescaped) whose raw value is v,
// and returns its raw value. ok is false when k does not hold it. The
// Gemini API nests it (generationConfig.maxOutputTokens) and takes
// snake_case names as well: then inner is the nested member's name as the
// body spells it, and the limit's gjson path is k + "." + inner (left to
// the caller to build, when it edits the limit); inner is "" when k itself
// is the limit.
func (f Format) OutputLimitIn(k, v string) (inner, raw string, ok bool) {
	member, want, nested := strings.Cut(f.OutputLimitField(), ".")
	if !nested {
		if k != member {
			return "", "", false
		}
		return "", v, true
	}
	if geminiKey(k) != member || !isObj(v) {
		return "", "", false
	}
	it, _ := objIter(v)
	for {
		name, val, more := it.next()
		if !more {
			return "", "", false
		}
		if geminiKey(name) == want {
			return name, val, true
		}
	}
}
