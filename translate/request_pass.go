package translate

import "github.com/tidwall/gjson"

func validJSON(s string) bool { return gjson.Valid(s) }

// passRequest handles a client that speaks the upstream's own format: the
// body is copied member by member (one pass, one copy), except the reasoning
// fields, which are rewritten in the upstream's dialect (a messages client's
// adaptive thinking passes unchanged in the thinking dialect), and
// stream_options, which always asks a chat upstream for the final usage.
// Members nobody classified pass unchanged; server-side ones are refused
// (the field rule, fields.go). Every member is validated on the way
// (validate.go), as on a translation.
func passRequest(client Format, dst []byte, s string, cfg *Config) ([]byte, Request, *Error) {
	var (
		req            Request
		r              reasoning
		c              commonMembers
		messages, opts string
		maxTokens      int64
		err            *Error
	)
	chat := client == Chat
	dst = append(dst, '{')
	top := cursor{s: s}
	top.obj()
	for {
		k, ok := top.key()
		if !ok {
			break
		}
		var v string
		if v, err = takeMember(&top, client, k); err != nil {
			return dst, req, err
		}
		if handled, err := r.member(k, v, chat); handled {
			if err != nil {
				return dst, req, err
			}
			continue
		}
		switch k {
		case "model", "stream", "temperature", "top_p":
			err = c.read(k, v)
		case "messages":
			messages = v
		case "top_k":
			err = checkTopK(v)
		case "stop", "stop_sequences":
			err = stopList(v, k)
		case "max_tokens", "max_completion_tokens":
			if isNull(v) {
				continue
			}
			if maxTokens, err = readMaxTokens(v, k); err != nil {
				return dst, req, err
			}
			if !chat {
				continue // written after the reasoning budget is settled
			}
		case "stream_options":
			if !chat {
				break
			}
			opts = v // an object (validated)
			continue
		case "output_config":
			if !chat { // an object (validated)
				err = r.outputEffort(field(v, "effort"))
			}
		default:
			err = passField(client, k, v)
		}
		if err != nil {
			return dst, req, err
		}
		dst = appendRawMember(dst, k, v)
	}
	if err = c.finish(&req); err != nil {
		return dst, req, err
	}
	if !isArr(messages) {
		return dst, req, badRequest("messages: must be an array")
	}
	if err = r.resolve(); err != nil {
		return dst, req, err
	}
	req.Reasoning = r.on
	if chat {
		req.IncludeUsage = field(opts, "include_usage") == "true"
		if req.Stream {
			dst = key(dst, "stream_options")
			dst = append(dst, '{')
			if oi, ok := objIter(opts); ok {
				for {
					k, v, ok := oi.next()
					if !ok {
						break
					}
					if k != "include_usage" {
						dst = appendRawMember(dst, k, v)
					}
				}
			}
			dst = key(dst, "include_usage")
			dst = append(dst, "true}"...)
		}
	} else {
		if maxTokens == 0 {
			return dst, req, badRequest("max_tokens: required")
		}
	}
	if !chat && r.passThinking(cfg) {
		dst = key(dst, "max_tokens")
		dst = appendInt(dst, maxTokens)
		dst = key(dst, "thinking")
		dst = append(dst, r.thinkingRaw...)
		return append(dst, '}'), req, nil
	}
	r.fix(cfg.Dialect(), &maxTokens)
	if !chat {
		dst = key(dst, "max_tokens")
		dst = appendInt(dst, maxTokens)
	}
	dst = r.appendReasoning(dst, cfg, chat)
	return append(dst, '}'), req, nil
}
