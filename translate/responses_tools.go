package translate

// A Responses request's tools and tool_choice as chat function tools:
// namespace tools flattened to "<namespace>__<name>", hosted tools
// withdrawn (the design is at the top of responses_request.go).

import "strings"

// appendTools writes the function tools, namespaces flattened and hosted
// tools withdrawn, and the tool choice.
func (o *respOptions) appendTools(dst []byte, tools, choice string) ([]byte, *Error) {
	c, err := readToolChoice(choice)
	if err != nil {
		return dst, err
	}
	if isNull(tools) {
		if c.kind == tcRequired || c.kind == tcFunction {
			return dst, badRequest("tool_choice: requires a tool, but no function tools are offered")
		}
		return dst, nil
	}
	it, ok := arrIter(tools)
	if !ok {
		return dst, badRequest("tools: must be an array")
	}
	var (
		nsBuf     [64]byte
		ns        = nsBuf[:0]
		withdrawn string // the first hosted tool type withdrawn
		n         int
		chosen    bool
	)
	mark := len(dst)
	dst = append(dst, `,"tools":[`...)
	tl := loc{name: "tools"}
	for i := 0; ; i++ {
		t, ok := it.elem()
		if !ok {
			break
		}
		p := tl.elem(i)
		if !isObj(t) {
			return dst, p.bad(": must be an object")
		}
		typ := field(t, "type")
		switch {
		case strEq(typ, "function"):
			var hit bool
			if dst, hit, err = appendFunctionTool(dst, t, "", &p, &c); err != nil {
				return dst, err
			}
			if hit {
				chosen = true
			}
			n++
		case strEq(typ, "namespace"):
			name := field(t, "name")
			if !isStr(name) || emptyStr(name) {
				return dst, p.bad(".name: must be a non-empty string")
			}
			ti, ok := arrIter(field(t, "tools"))
			if !ok {
				return dst, p.bad(".tools: must be an array of function tools")
			}
			ns = append(ns, inner(name)...)
			ns = append(ns, 0)
			nt := p.member("tools")
			for j := 0; ; j++ {
				ft, ok := ti.elem()
				if !ok {
					break
				}
				fp := nt.elem(j)
				if !isObj(ft) || !strEq(field(ft, "type"), "function") {
					return dst, fp.bad(": namespaces may only hold function tools here")
				}
				var hit bool
				if dst, hit, err = appendFunctionTool(dst, ft, inner(name), &fp, &c); err != nil {
					return dst, err
				}
				if hit {
					chosen = true
				}
				n++
			}
		case strEq(typ, "custom"):
			return dst, p.bad(": custom tools (free-form input) are not supported; define a function tool with a JSON schema instead")
		case isStr(typ):
			// A hosted tool: the upstream cannot run it, so the model is
			// not offered it (Codex offers web_search on every request).
			if withdrawn == "" {
				withdrawn = str(typ)
			}
		default:
			return dst, p.bad(".type: must be a string")
		}
	}
	o.keep(ns, tools)
	if n == 0 {
		dst = dst[:mark]
		if c.kind == tcRequired || c.kind == tcFunction {
			msg := "tool_choice: requires a tool, but no function tools are offered"
			if withdrawn != "" {
				msg += "; hosted tools such as " + withdrawn + " cannot run on this model's upstream"
			}
			return dst, badRequest(msg)
		}
		return dst, nil
	}
	if dst[len(dst)-1] == '[' { // every tool was outside allowed_tools
		dst = dst[:mark]
		if c.kind == tcRequired {
			return dst, badRequest("tool_choice.tools: none of the allowed tools is offered")
		}
		return append(dst, `,"tool_choice":"none"`...), nil
	}
	dst = append(dst, ']')
	switch c.kind {
	case tcNone:
		dst = append(dst, `,"tool_choice":"none"`...)
	case tcRequired:
		dst = append(dst, `,"tool_choice":"required"`...)
	case tcFunction:
		if !chosen {
			return dst, badRequest("tool_choice.name: no function tool named " + str(c.name) + " is offered")
		}
		dst = append(dst, `,"tool_choice":{"type":"function","function":{"name":"`...)
		dst = appendFlatName(dst, inner(c.ns), inner(c.name))
		dst = append(dst, `"}}`...)
	}
	return dst, nil
}

// keep copies the namespace list and the tools array into o, in one
// allocation: the answer is written after the request's bytes are gone.
// The tools are compacted, since a stream's events are one line each.
func (o *respOptions) keep(ns []byte, tools string) {
	var b strings.Builder
	b.Grow(len(ns) + len(tools))
	b.Write(ns)
	for i := 0; i < len(tools); {
		switch c := tools[i]; {
		case c == '"':
			end := stringEnd(tools, i)
			if end < 0 { // cannot happen in a validated body
				end = len(tools)
			}
			b.WriteString(tools[i:end])
			i = end
		case isSpace(c):
			i++
		default:
			b.WriteByte(c)
			i++
		}
	}
	k := b.String()
	o.namespaces, o.tools = k[:len(ns)], k[len(ns):]
}

const (
	tcAuto uint8 = iota
	tcNone
	tcRequired
	tcFunction
)

// toolChoice is a Responses tool_choice: a mode, a named function, or a set
// of allowed tools (with a mode).
type toolChoice struct {
	kind     uint8
	name, ns string // raw literals of a named function
	allowed  string // raw array of allowed_tools, or ""
}

func readToolChoice(v string) (toolChoice, *Error) {
	var c toolChoice
	switch {
	case isNull(v) || strEq(v, "auto"):
	case strEq(v, "none"):
		c.kind = tcNone
	case strEq(v, "required"):
		c.kind = tcRequired
	case isObj(v):
		t := field(v, "type")
		switch {
		case strEq(t, "function"):
			c.kind, c.name, c.ns = tcFunction, field(v, "name"), field(v, "namespace")
			if !isStr(c.name) || emptyStr(c.name) {
				return c, badRequest("tool_choice.name: must be a non-empty string")
			}
			if !isNull(c.ns) && !isStr(c.ns) {
				return c, badRequest("tool_choice.namespace: must be a string")
			}
			if !isStr(c.ns) {
				c.ns = ""
			}
		case strEq(t, "allowed_tools"):
			c.allowed = field(v, "tools")
			if !isArr(c.allowed) {
				return c, badRequest("tool_choice.tools: must be an array of tools")
			}
			switch m := field(v, "mode"); {
			case isNull(m) || strEq(m, "auto"):
			case strEq(m, "required"):
				c.kind = tcRequired
			default:
				return c, badRequest("tool_choice.mode: must be auto or required")
			}
		case strEq(t, "custom"):
			return c, badRequest("tool_choice: custom tools are not supported; offer and choose a function tool")
		case isStr(t):
			return c, badRequest("tool_choice: " + str(t) + " is a hosted tool, which this model's upstream cannot run; " +
				"Timeblock offers only function tools to the model (hosted tools are withdrawn)")
		default:
			return c, badRequest("tool_choice.type: must be a string")
		}
	default:
		return c, badRequest("tool_choice: must be auto, none, required, {type: function, name} or {type: allowed_tools, mode, tools}")
	}
	return c, nil
}

// allows reports whether the function ns/name (raw, without quotes) is among
// the allowed tools, when there is such a list.
func (c *toolChoice) allows(ns, name string) bool {
	if c.allowed == "" {
		return true
	}
	it, _ := arrIter(c.allowed)
	for {
		t, ok := it.elem()
		if !ok {
			return false
		}
		if inner(field(t, "name")) == name && inner(field(t, "namespace")) == ns {
			return true
		}
		// A namespace allowed as a whole allows its tools.
		if ns != "" && strEq(field(t, "type"), "namespace") && inner(field(t, "name")) == ns {
			return true
		}
	}
}

// appendFunctionTool writes one function tool as a chat tool, its name
// prefixed with its namespace (raw; "" for none). hit reports that it is
// the function tool_choice names.
func appendFunctionTool(dst []byte, t, ns string, p *loc, c *toolChoice) ([]byte, bool, *Error) {
	var name, desc, params, strict string
	it, _ := objIter(t)
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		switch k {
		case "name":
			name = v
		case "description":
			desc = v
		case "parameters":
			params = v
		case "strict":
			strict = v
		}
	}
	if !isStr(name) || emptyStr(name) {
		return dst, false, p.bad(".name: must be a non-empty string")
	}
	if !isNull(params) && !isObj(params) {
		return dst, false, p.bad(".parameters: must be an object (a JSON schema)")
	}
	if !c.allows(ns, inner(name)) {
		return dst, false, nil
	}
	dst = sep(dst)
	dst = append(dst, `{"type":"function","function":{"name":"`...)
	dst = appendFlatName(dst, ns, inner(name))
	dst = append(dst, '"')
	if isStr(desc) {
		dst = appendRawMember(dst, "description", desc)
	}
	dst = append(dst, `,"parameters":`...)
	if isNull(params) {
		dst = append(dst, `{"type":"object","properties":{}}`...)
	} else {
		dst = append(dst, params...)
	}
	if strict == "true" {
		dst = append(dst, `,"strict":true`...)
	}
	hit := c.kind == tcFunction && inner(c.name) == inner(name) && inner(c.ns) == ns
	return append(dst, `}}`...), hit, nil
}

// appendFlatName writes the inside of the string literal of a function name:
// ns__name, or name alone.
func appendFlatName(dst []byte, ns, name string) []byte {
	if ns != "" {
		dst = append(dst, ns...)
		dst = append(dst, nsSep...)
	}
	return append(dst, name...)
}

// splitFlatName undoes appendFlatName for a called function name (raw, no
// quotes): the longest namespace of list that prefixes it wins.
func splitFlatName(list, name string) (ns, rest string) {
	for list != "" {
		i := strings.IndexByte(list, 0)
		if i < 0 {
			break
		}
		cand := list[:i]
		list = list[i+1:]
		if len(cand) > len(ns) && len(name) > len(cand)+len(nsSep) &&
			strings.HasPrefix(name, cand) && name[len(cand):len(cand)+len(nsSep)] == nsSep {
			ns = cand
		}
	}
	if ns == "" {
		return "", name
	}
	return ns, name[len(ns)+len(nsSep):]
}
