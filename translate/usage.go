package translate

// usage is token usage as the upstream reported it, merged across events:
// a field the last event lacks keeps the value an earlier event gave (a
// messages stream reports input in message_start and output in message_delta).
type usage struct {
	fromChat bool
	// chat: prompt is the whole input; messages: input excludes cache reads
	// and writes.
	prompt, input, cacheRead, cacheWrite, output, reasoning int64
	seen                                                    bool
}

func (u *usage) readChat(v string) {
	it, ok := objIter(v)
	if !ok {
		return
	}
	u.fromChat, u.seen = true, true
	for {
		k, val, ok := it.next()
		if !ok {
			return
		}
		switch k {
		case "prompt_tokens":
			setCount(&u.prompt, val)
		case "completion_tokens":
			setCount(&u.output, val)
		case "prompt_tokens_details":
			setCount(&u.cacheRead, field(val, "cached_tokens"))
		case "completion_tokens_details":
			setCount(&u.reasoning, field(val, "reasoning_tokens"))
		}
	}
}

func (u *usage) readMessages(v string) {
	it, ok := objIter(v)
	if !ok {
		return
	}
	u.seen = true
	for {
		k, val, ok := it.next()
		if !ok {
			return
		}
		switch k {
		case "input_tokens":
			setCount(&u.input, val)
		case "output_tokens":
			setCount(&u.output, val)
		case "cache_read_input_tokens":
			setCount(&u.cacheRead, val)
		case "cache_creation_input_tokens":
			setCount(&u.cacheWrite, val)
		}
	}
}

// setCount keeps a present, non-negative integer (null or absent leaves it).
func setCount(dst *int64, v string) {
	if n, ok := toInt(v); ok && n >= 0 {
		*dst = n
	}
}

func (u *usage) promptTotal() int64 {
	if u.fromChat {
		return u.prompt
	}
	return u.input + u.cacheRead + u.cacheWrite
}

func (u *usage) inputUncached() int64 {
	if !u.fromChat {
		return u.input
	}
	return max(u.prompt-u.cacheRead-u.cacheWrite, 0)
}

// reasoningTokens is the upstream's count, or else an estimate: the output
// tokens split in proportion to the bytes of reasoning and of everything
// else the model wrote (most servers that separate reasoning do not count it).
func (u *usage) reasoningTokens(reasonBytes, otherBytes int64) int64 {
	if u.reasoning > 0 || reasonBytes == 0 || u.output == 0 {
		return u.reasoning
	}
	n := (u.output*reasonBytes + (reasonBytes+otherBytes)/2) / (reasonBytes + otherBytes)
	return min(max(n, 1), u.output)
}

func (u *usage) appendChat(dst []byte, reasoning int64) []byte {
	p := u.promptTotal()
	dst = append(dst, `{"prompt_tokens":`...)
	dst = appendInt(dst, p)
	dst = append(dst, `,"completion_tokens":`...)
	dst = appendInt(dst, u.output)
	dst = append(dst, `,"total_tokens":`...)
	dst = appendInt(dst, p+u.output)
	dst = append(dst, `,"prompt_tokens_details":{"cached_tokens":`...)
	dst = appendInt(dst, u.cacheRead)
	dst = append(dst, `},"completion_tokens_details":{"reasoning_tokens":`...)
	dst = appendInt(dst, reasoning)
	return append(dst, `}}`...)
}

func (u *usage) appendMessages(dst []byte) []byte {
	dst = append(dst, `{"input_tokens":`...)
	dst = appendInt(dst, u.inputUncached())
	dst = append(dst, `,"cache_creation_input_tokens":`...)
	dst = appendInt(dst, u.cacheWrite)
	dst = append(dst, `,"cache_read_input_tokens":`...)
	dst = appendInt(dst, u.cacheRead)
	dst = append(dst, `,"output_tokens":`...)
	dst = appendInt(dst, u.output)
	return append(dst, '}')
}
