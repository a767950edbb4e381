package translate

// A Gemini request's generationConfig: sampling, stop sequences, the
// response format, and thinkingConfig as the uniform reasoning control
// (the design is at the top of gemini_request.go).

import "strings"

// read reads generationConfig, its thinkingConfig into r.
func (g *geminiConfig) read(v string, r *reasoning, cfg *Config) *Error {
	if isNull(v) {
		return nil
	}
	it, ok := objIter(v)
	if !ok {
		return badRequest("generationConfig: must be an object")
	}
	var mime, schema, jsonSchema, thinking string
	for {
		k, val, ok := it.next()
		if !ok {
			break
		}
		name := geminiKey(k)
		var err *Error
		switch name {
		case "temperature":
			firstOf(&g.temperature, val)
			err = checkRange(val, "generationConfig.temperature", 0, 1)
		case "topP":
			firstOf(&g.topP, val)
			err = checkRange(val, "generationConfig.topP", 0, 1)
		case "topK":
			firstOf(&g.topK, val)
			if n, ok := toInt(val); !isNull(val) && (!ok || n < 0) {
				err = badRequest("generationConfig.topK: must be a non-negative integer")
			}
		case "seed":
			firstOf(&g.seed, val)
			if _, ok := toInt(val); !isNull(val) && !ok {
				err = badRequest("generationConfig.seed: must be an integer")
			}
		case "presencePenalty":
			firstOf(&g.presence, val)
			err = checkRange(val, "generationConfig.presencePenalty", -2, 2)
		case "frequencyPenalty":
			firstOf(&g.frequency, val)
			err = checkRange(val, "generationConfig.frequencyPenalty", -2, 2)
		case "stopSequences":
			firstOf(&g.stop, val)
			if !isNull(val) && !isArr(val) {
				err = badRequest("generationConfig.stopSequences: must be an array of strings")
			} else {
				err = stopList(val, "generationConfig.stopSequences")
			}
		case "maxOutputTokens":
			if !isNull(val) && g.maxTokens == 0 {
				g.maxTokens, err = readMaxTokens(val, "generationConfig.maxOutputTokens")
			}
		case "responseMimeType":
			firstOf(&mime, val)
		case "responseSchema":
			firstOf(&schema, val)
		case "responseJsonSchema":
			firstOf(&jsonSchema, val)
		case "thinkingConfig":
			firstOf(&thinking, val)
		default:
			// candidateCount above 1, audio and image output and log
			// probabilities are refused; the rest are hints (fields.go).
			err = uncarriedIn(Gemini, "generationConfig", -1, name, val)
		}
		if err != nil {
			return err
		}
	}
	if err := g.readFormat(mime, schema, jsonSchema, cfg); err != nil {
		return err
	}
	return readThinkingConfig(thinking, r, &g.showThoughts)
}

// readFormat reads responseMimeType and the schemas into a chat
// response_format.
func (g *geminiConfig) readFormat(mime, schema, jsonSchema string, cfg *Config) *Error {
	if !isNull(schema) && !isNull(jsonSchema) {
		return badRequest("generationConfig: send responseSchema or responseJsonSchema, not both")
	}
	switch {
	case isNull(mime) || strEq(mime, "text/plain"):
		if !isNull(schema) || !isNull(jsonSchema) {
			return badRequest("generationConfig.responseMimeType: a response schema needs responseMimeType application/json")
		}
		return nil
	case !strEq(mime, "application/json"):
		return badRequest("generationConfig.responseMimeType: must be text/plain or application/json")
	}
	var b []byte
	switch {
	case !isNull(schema):
		if !isObj(schema) {
			return badRequest("generationConfig.responseSchema: must be an object (a Schema)")
		}
		b = append(b, `{"type":"json_schema","json_schema":{"name":"response","schema":`...)
		p := loc{name: "generationConfig.responseSchema"}
		var err *Error
		if b, err = appendGeminiSchema(b, schema, &p); err != nil {
			return err
		}
		b = append(b, "}}"...)
	case !isNull(jsonSchema):
		if !isObj(jsonSchema) {
			return badRequest("generationConfig.responseJsonSchema: must be an object (a JSON schema)")
		}
		b = append(b, `{"type":"json_schema","json_schema":{"name":"response","schema":`...)
		b = append(b, jsonSchema...)
		b = append(b, "}}"...)
	case cfg.Upstream != Chat:
		// A messages upstream enforces a JSON schema (output_config.format,
		// which the chat → messages translation writes), not "any object".
		return badRequest("generationConfig.responseMimeType: this model's upstream can enforce only a JSON schema: send responseJsonSchema (or responseSchema) with application/json, or describe the format in the prompt")
	default:
		g.format = jsonObjectFormat
		return nil
	}
	g.format = string(b)
	return nil
}

// readThinkingConfig reads thinkingConfig {includeThoughts, thinkingBudget,
// thinkingLevel} into the uniform control.
func readThinkingConfig(v string, r *reasoning, show *bool) *Error {
	if isNull(v) {
		return nil
	}
	it, ok := objIter(v)
	if !ok {
		return badRequest("generationConfig.thinkingConfig: must be an object {includeThoughts?, thinkingBudget?, thinkingLevel?}")
	}
	var include, budget, level string
	for {
		k, val, ok := it.next()
		if !ok {
			break
		}
		switch geminiKey(k) {
		case "includeThoughts":
			firstOf(&include, val)
		case "thinkingBudget":
			firstOf(&budget, val)
		case "thinkingLevel":
			firstOf(&level, val)
		}
	}
	if err := checkBool(include, "generationConfig.thinkingConfig.includeThoughts"); err != nil {
		return err
	}
	*show = include == "true"
	if !isNull(level) && strings.EqualFold(inner(level), "THINKING_LEVEL_UNSPECIFIED") {
		level = ""
	}
	switch {
	case !isNull(budget) && !isNull(level):
		return badRequest("generationConfig.thinkingConfig: send thinkingBudget or thinkingLevel, not both")
	case !isNull(budget):
		n, ok := toInt(budget)
		switch {
		case !ok || n < -1:
			return badRequest("generationConfig.thinkingConfig.thinkingBudget: must be an integer: 0 (off), -1 (dynamic) or a number of tokens")
		case n == 0:
			r.effortSrc = -1
		case n == -1:
			r.effortSrc = 1 // the upstream's default level
		default:
			r.effortSrc, r.budget = 1, n
		}
	case !isNull(level):
		if !isStr(level) {
			return badRequest("generationConfig.thinkingConfig.thinkingLevel: must be a string: minimal, low, medium or high")
		}
		switch l := inner(level); {
		case strings.EqualFold(l, "minimal"), strings.EqualFold(l, "low"):
			r.effortSrc, r.effort = 1, effLow
		case strings.EqualFold(l, "medium"):
			r.effortSrc, r.effort = 1, effMedium
		case strings.EqualFold(l, "high"):
			r.effortSrc, r.effort = 1, effHigh
		default:
			return badRequest("generationConfig.thinkingConfig.thinkingLevel: must be minimal, low, medium or high")
		}
	case include == "true":
		// Thoughts asked for, at the default level.
		r.effortSrc = 1
	}
	return nil
}

// isGeminiTextOnly: responseModalities that ask for text alone.
func isGeminiTextOnly(v string) bool {
	it, ok := arrIter(v)
	if !ok {
		return false
	}
	for {
		e, ok := it.elem()
		if !ok {
			return true
		}
		if !isStr(e) || !strings.EqualFold(inner(e), "TEXT") {
			return false
		}
	}
}
