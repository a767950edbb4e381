package translate

// The request fields that bound how many tokens an answer may hold, by
// format, so that whoever caps them (the gate, to a pool's ceiling) need
// not know each format's names.

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
