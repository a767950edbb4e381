package translate

// Responses objects: the non-streaming answer, and the writers of the
// response object and its output items that the event stream shares.

import "encoding/base64"

// responsesResponse writes the response object for a whole upstream
// response: from chat directly, from messages through chat.
func responsesResponse(dst []byte, s string, upstream Format, req *Request, prefilled bool) []byte {
	if upstream == Chat {
		return chatToResponses(dst, s, req, prefilled)
	}
	mark := len(dst)
	mid := messagesResponseToChat(dst, s, prefilled)
	end := len(mid)
	out := chatToResponses(mid, b2s(mid[mark:end]), req, false)
	n := copy(out[mark:], out[end:])
	return out[:mark+n]
}

func chatToResponses(dst []byte, s string, req *Request, prefilled bool) []byte {
	var cc chatCompletion
	cc.read(s)
	a, calls, u := &cc.a, cc.calls, &cc.u
	a.split(prefilled)
	stop := a.finalStop()
	t, ok := toInt(cc.created)
	if !ok {
		t = now().Unix()
	}

	// The reasoning and the text as escaped string content.
	var rbuf, tbuf []byte
	reason, text := "", ""
	if a.hasReasoning() {
		if a.reasonLit != "" {
			reason = inner(a.reasonLit)
		} else {
			rbuf = appendEscaped(rbuf, a.reasoning)
			reason = b2s(rbuf)
		}
	}
	if a.hasText() {
		if a.textLit != "" {
			text = inner(a.textLit)
		} else {
			tbuf = appendEscaped(tbuf, a.text)
			text = b2s(tbuf)
		}
	}
	total := a.tools
	if reason != "" {
		total++
	}
	if text != "" {
		total++
	}
	idx := 0
	next := func() (int, string) { // the index and status of the next item
		i := idx
		idx++
		if idx == total {
			return i, itemStatus(stop, false)
		}
		return i, "completed"
	}

	var idb [48]byte
	base := appendIDBase(idb[:0], cc.id)
	dst = appendRespHead(dst, base, t, cc.model)
	if reason != "" {
		i, st := next()
		dst = appendReasoningItem(dst, base, i, reason, req.resp.encrypted, st)
	}
	if text != "" {
		i, st := next()
		dst = appendMessageItem(dst, base, i, text, st)
	}
	var toolBytes int64
	if ti, ok := arrIter(calls); ok {
		for {
			c, ok := ti.elem()
			if !ok {
				break
			}
			idLit, name, args := readChatCall(c)
			if !named(name) {
				continue // a.tools does not count it either
			}
			switch {
			case isStr(args):
			case isObj(args): // some servers send the object itself
				args = b2s(appendStr(nil, args))
			default:
				args = `"{}"`
			}
			toolBytes += int64(len(args) - 2)
			if emptyStr(args) {
				args = `"{}"` // no argument text: clients parse the arguments
			}
			i, st := next()
			dst = appendCallItem(dst, base, i, []byte(idLit), inner(name), req.resp.namespaces, inner(args), st)
		}
	}
	dst = appendRespTail(dst, &req.resp, stop, nil)
	dst = append(dst, `,"usage":`...)
	dst = appendRespUsage(dst, u, u.reasoningTokens(a.reasonLen(), a.textLen()+toolBytes))
	return append(dst, '}')
}

// itemStatus is the status of an output item: the last one of a response
// cut short is incomplete.
func itemStatus(stop stopReason, failed bool) string {
	if failed || stop == stopMax || stop == stopRefusal {
		return "incomplete"
	}
	return "completed"
}

// appendIDBase appends the part of an upstream id (a string literal) that
// names the response and its items (escaped), or a random one.
func appendIDBase(dst []byte, lit string) []byte {
	if !isStr(lit) {
		return appendRandom(dst, 24)
	}
	in := inner(lit)
	for _, p := range [...]string{"chatcmpl-", "msg_", "resp_", "resp-"} {
		if len(in) > len(p) && in[:len(p)] == p {
			in = in[len(p):]
			break
		}
	}
	if in == "" {
		return appendRandom(dst, 24)
	}
	return append(dst, in...)
}

// appendItemID writes an output item's id: prefix, the response's base and
// the item's index.
func appendItemID(dst []byte, prefix string, base []byte, n int) []byte {
	dst = append(dst, '"')
	dst = append(dst, prefix...)
	dst = append(dst, base...)
	dst = append(dst, '_')
	dst = appendInt(dst, int64(n))
	return append(dst, '"')
}

// appendRespHead opens a response object, up to its output array.
func appendRespHead(dst, base []byte, created int64, model string) []byte {
	dst = append(dst, `{"id":"resp_`...)
	dst = append(dst, base...)
	dst = append(dst, `","object":"response","created_at":`...)
	dst = appendInt(dst, created)
	dst = append(dst, `,"model":`...)
	dst = appendModel(dst, model)
	return append(dst, `,"output":[`...)
}

// appendRespTail closes the output array and writes the members that
// depend on how the response ended (stopNone while it is in progress; a
// non-nil e when it failed), then the echoes of the request. usage follows.
func appendRespTail(dst []byte, o *respOptions, stop stopReason, e *Error) []byte {
	dst = append(dst, `],"status":"`...)
	switch {
	case e != nil:
		dst = append(dst, `failed","error":{"code":`...)
		dst = appendStr(dst, respErrorCode(e))
		dst = append(dst, `,"message":`...)
		dst = appendStr(dst, e.Message)
		dst = append(dst, `},"incomplete_details":null`...)
	case stop == stopNone:
		dst = append(dst, `in_progress","error":null,"incomplete_details":null`...)
	case stop == stopMax:
		dst = append(dst, `incomplete","error":null,"incomplete_details":{"reason":"max_output_tokens"}`...)
	case stop == stopRefusal:
		dst = append(dst, `incomplete","error":null,"incomplete_details":{"reason":"content_filter"}`...)
	default:
		dst = append(dst, `completed","error":null,"incomplete_details":null`...)
	}
	dst = append(dst, `,"instructions":null,"max_output_tokens":`...)
	if o.maxOutput > 0 {
		dst = appendInt(dst, o.maxOutput)
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"parallel_tool_calls":`...)
	if o.noParallel {
		dst = append(dst, "false"...)
	} else {
		dst = append(dst, "true"...)
	}
	dst = append(dst, `,"previous_response_id":null,"reasoning":{"effort":`...)
	dst = appendOptStr(dst, respEfforts[o.effort])
	dst = append(dst, `,"summary":`...)
	dst = appendOptStr(dst, respSummaries[o.summary])
	// Nothing is stored, whatever the request said. The tools are the
	// request's, as the Responses API echoes them (hosted ones included,
	// although the model was not offered them).
	dst = append(dst, `},"store":false,"temperature":null,"top_p":null,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":`...)
	if o.tools != "" {
		dst = append(dst, o.tools...)
	} else {
		dst = append(dst, "[]"...)
	}
	return append(dst, `,"truncation":"disabled","metadata":{}`...)
}

// respErrorCode is the Responses error code for an error: the upstream's
// own when it gave one, else one by kind.
func respErrorCode(e *Error) string {
	if e.Code != "" {
		return e.Code
	}
	switch e.Kind {
	case RateLimit:
		return "rate_limit_exceeded"
	case InvalidRequest, RequestTooLarge:
		return "invalid_prompt"
	}
	return "server_error"
}

// appendRespUsage writes a usage object. The input count is all of the
// input, cached tokens included.
func appendRespUsage(dst []byte, u *usage, reasoning int64) []byte {
	in := u.promptTotal()
	dst = append(dst, `{"input_tokens":`...)
	dst = appendInt(dst, in)
	dst = append(dst, `,"input_tokens_details":{"cached_tokens":`...)
	dst = appendInt(dst, u.cacheRead)
	dst = append(dst, `},"output_tokens":`...)
	dst = appendInt(dst, u.output)
	dst = append(dst, `,"output_tokens_details":{"reasoning_tokens":`...)
	dst = appendInt(dst, reasoning)
	dst = append(dst, `},"total_tokens":`...)
	dst = appendInt(dst, in+u.output)
	return append(dst, '}')
}

// appendReasoningItem writes a reasoning item; text is the reasoning as
// escaped string content. encrypted adds encrypted_content, from which a
// later request restores the reasoning (appendReasoningText).
func appendReasoningItem(dst, base []byte, n int, text string, encrypted bool, status string) []byte {
	dst = sep(dst)
	dst = append(dst, `{"id":`...)
	dst = appendItemID(dst, "rs_", base, n)
	dst = append(dst, `,"type":"reasoning","summary":[`...)
	if text != "" {
		dst = append(dst, `{"type":"summary_text","text":"`...)
		dst = append(dst, text...)
		dst = append(dst, `"}`...)
	}
	dst = append(dst, ']')
	if encrypted && text != "" {
		dst = append(dst, `,"encrypted_content":"`+encPrefix...)
		dst = base64.StdEncoding.AppendEncode(dst, s2b(text))
		dst = append(dst, '"')
	}
	if status != "" {
		dst = append(dst, `,"status":"`...)
		dst = append(dst, status...)
		dst = append(dst, '"')
	}
	return append(dst, '}')
}

// appendMessageItem writes an assistant message item holding text (escaped
// string content); status "in_progress" writes it empty, as it is added.
func appendMessageItem(dst, base []byte, n int, text, status string) []byte {
	dst = sep(dst)
	dst = append(dst, `{"id":`...)
	dst = appendItemID(dst, "msg_", base, n)
	dst = append(dst, `,"type":"message","status":"`...)
	dst = append(dst, status...)
	dst = append(dst, `","role":"assistant","content":[`...)
	if status != "in_progress" {
		dst = appendTextPart(dst, text)
	}
	return append(dst, `]}`...)
}

// appendTextPart writes an output_text part.
func appendTextPart(dst []byte, text string) []byte {
	dst = append(dst, `{"type":"output_text","annotations":[],"logprobs":[],"text":"`...)
	dst = append(dst, text...)
	return append(dst, `"}`...)
}

// appendCallItem writes a function_call item. name is the function as the
// upstream called it (raw): a flattened namespace tool gets its name and
// namespace back.
func appendCallItem(dst, base []byte, n int, callID []byte, name, namespaces, args, status string) []byte {
	dst = sep(dst)
	dst = append(dst, `{"id":`...)
	dst = appendItemID(dst, "fc_", base, n)
	dst = append(dst, `,"type":"function_call","status":"`...)
	dst = append(dst, status...)
	dst = append(dst, `","call_id":`...)
	dst = appendToolID(dst, callID, Chat)
	dst = appendCallName(dst, name, namespaces)
	dst = append(dst, `,"arguments":"`...)
	dst = append(dst, args...)
	return append(dst, `"}`...)
}

// appendCallName writes the name member (and namespace, when there is one).
func appendCallName(dst []byte, name, namespaces string) []byte {
	ns, rest := splitFlatName(namespaces, name)
	dst = append(dst, `,"name":"`...)
	dst = append(dst, rest...)
	dst = append(dst, '"')
	if ns != "" {
		dst = append(dst, `,"namespace":"`...)
		dst = append(dst, ns...)
		dst = append(dst, '"')
	}
	return dst
}
