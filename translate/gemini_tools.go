package translate

// A Gemini request's tools and toolConfig: function declarations as chat
// function tools, Google's OpenAPI schema subset as JSON Schema, and
// functionCallingConfig as tool_choice.

import (
	"strconv"
	"strings"
)

// geminiChoice is toolConfig.functionCallingConfig.
type geminiChoice struct {
	mode    uint8  // tcAuto, tcNone, tcRequired; tcFunction is settled later
	set     bool   // a mode was given
	allowed string // raw array of allowedFunctionNames, or ""
}

func readGeminiToolConfig(v string) (geminiChoice, *Error) {
	var gc geminiChoice
	if isNull(v) {
		return gc, nil
	}
	it, ok := objIter(v)
	if !ok {
		return gc, badRequest("toolConfig: must be an object {functionCallingConfig?}")
	}
	var fcc string
	for {
		k, val, ok := it.next()
		if !ok {
			break
		}
		name := geminiKey(k)
		if name == "functionCallingConfig" {
			firstOf(&fcc, val)
			continue
		}
		if err := uncarriedIn(Gemini, "toolConfig", -1, name, val); err != nil {
			return gc, err
		}
	}
	if isNull(fcc) {
		return gc, nil
	}
	it, ok = objIter(fcc)
	if !ok {
		return gc, badRequest("toolConfig.functionCallingConfig: must be an object {mode?, allowedFunctionNames?}")
	}
	var mode, allowed string
	for {
		k, val, ok := it.next()
		if !ok {
			break
		}
		switch geminiKey(k) {
		case "mode":
			firstOf(&mode, val)
		case "allowedFunctionNames":
			firstOf(&allowed, val)
		}
	}
	if !isNull(mode) {
		m := inner(mode)
		switch {
		case !isStr(mode):
			return gc, badRequest("toolConfig.functionCallingConfig.mode: must be a string: AUTO, ANY, NONE or VALIDATED")
		case strings.EqualFold(m, "AUTO"), strings.EqualFold(m, "VALIDATED"):
			gc.set = true
		case strings.EqualFold(m, "ANY"):
			gc.mode, gc.set = tcRequired, true
		case strings.EqualFold(m, "NONE"):
			gc.mode, gc.set = tcNone, true
		case strings.EqualFold(m, "MODE_UNSPECIFIED"):
		default:
			return gc, badRequest("toolConfig.functionCallingConfig.mode: must be AUTO, ANY, NONE or VALIDATED")
		}
	}
	if !isNull(allowed) {
		if err := stringArray(allowed, "toolConfig.functionCallingConfig.allowedFunctionNames"); err != nil {
			return gc, err
		}
		if !isEmptyArr(allowed) {
			gc.allowed = allowed
		}
	}
	return gc, nil
}

// allows reports whether the function name (a literal) is allowed.
func (gc *geminiChoice) allows(name string) bool {
	if gc.allowed == "" {
		return true
	}
	it, _ := arrIter(gc.allowed)
	for {
		e, ok := it.elem()
		if !ok {
			return false
		}
		if e == name {
			return true
		}
	}
}

// appendGeminiTools writes the function declarations as chat tools, and the
// tool choice.
func appendGeminiTools(dst []byte, tools, toolConfig string) ([]byte, *Error) {
	gc, err := readGeminiToolConfig(toolConfig)
	if err != nil {
		return dst, err
	}
	mark := len(dst)
	dst = append(dst, `,"tools":[`...)
	n := 0
	var only string // the name of the one function written
	if !isNull(tools) {
		it, ok := arrIter(tools)
		if !ok {
			return dst, badRequest("tools: must be an array of Tool objects {functionDeclarations}")
		}
		tl := loc{name: "tools"}
		for i := 0; ; i++ {
			t, ok := it.elem()
			if !ok {
				break
			}
			p := tl.elem(i)
			ti, ok := objIter(t)
			if !ok {
				return dst, p.bad(": must be an object {functionDeclarations}")
			}
			for {
				k, v, ok := ti.next()
				if !ok {
					break
				}
				name := geminiKey(k)
				if name != "functionDeclarations" {
					if isNull(v) {
						continue
					}
					return dst, p.bad(": server-side tool " + strconv.Quote(name) + " is not supported; declare the functions your client runs in functionDeclarations instead")
				}
				di, ok := arrIter(v)
				if !ok {
					return dst, p.bad(".functionDeclarations: must be an array")
				}
				dl := p.member("functionDeclarations")
				for j := 0; ; j++ {
					d, ok := di.elem()
					if !ok {
						break
					}
					dp := dl.elem(j)
					var wrote string
					if dst, wrote, err = appendGeminiFunction(dst, d, &dp, &gc); err != nil {
						return dst, err
					}
					if wrote != "" {
						n++
						only = wrote
					}
				}
			}
		}
	}
	if gc.allowed != "" {
		if err = checkAllowed(&gc, tools); err != nil {
			return dst[:mark], err
		}
	}
	if n == 0 {
		dst = dst[:mark]
		if gc.mode == tcRequired {
			return dst, badRequest("toolConfig.functionCallingConfig.mode: ANY requires a function, but no functionDeclarations are given")
		}
		return dst, nil
	}
	dst = append(dst, ']')
	switch {
	case gc.mode == tcNone:
		dst = append(dst, `,"tool_choice":"none"`...)
	case gc.mode == tcRequired && n == 1 && gc.allowed != "":
		dst = append(dst, `,"tool_choice":{"type":"function","function":{"name":`...)
		dst = append(dst, only...)
		dst = append(dst, `}}`...)
	case gc.mode == tcRequired:
		dst = append(dst, `,"tool_choice":"required"`...)
	case gc.set:
		dst = append(dst, `,"tool_choice":"auto"`...)
	}
	return dst, nil
}

// checkAllowed makes sure each allowed name is declared.
func checkAllowed(gc *geminiChoice, tools string) *Error {
	it, _ := arrIter(gc.allowed)
	for i := 0; ; i++ {
		name, ok := it.elem()
		if !ok {
			return nil
		}
		if !declared(tools, name) {
			return badRequest(pathi("toolConfig.functionCallingConfig.allowedFunctionNames", i) + ": no function named " + str(name) + " is declared in tools")
		}
	}
}

// declared reports whether a function named name (a literal) is declared.
func declared(tools, name string) bool {
	it, _ := arrIter(tools)
	for {
		t, ok := it.elem()
		if !ok {
			return false
		}
		di, _ := arrIter(geminiField(t, "functionDeclarations"))
		for {
			d, ok := di.elem()
			if !ok {
				break
			}
			if field(d, "name") == name {
				return true
			}
		}
	}
}

// appendGeminiFunction writes one function declaration as a chat function
// tool; wrote is its name (a literal), or "" when it is not allowed.
func appendGeminiFunction(dst []byte, d string, p *loc, gc *geminiChoice) ([]byte, string, *Error) {
	it, ok := objIter(d)
	if !ok {
		return dst, "", p.bad(": must be an object {name, description?, parameters?}")
	}
	var name, desc, params, jsonParams string
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		switch geminiKey(k) {
		case "name":
			firstOf(&name, v)
		case "description":
			firstOf(&desc, v)
		case "parameters":
			firstOf(&params, v)
		case "parametersJsonSchema":
			firstOf(&jsonParams, v)
		}
		// response, responseJsonSchema and behavior describe the result or
		// how the Live API runs the call: hints, dropped.
	}
	switch {
	case !isStr(name) || emptyStr(name):
		return dst, "", p.bad(".name: must be a non-empty string")
	case !isNull(desc) && !isStr(desc):
		return dst, "", p.bad(".description: must be a string")
	case !isNull(params) && !isNull(jsonParams):
		return dst, "", p.bad(": send parameters or parametersJsonSchema, not both")
	case !isNull(params) && !isObj(params):
		return dst, "", p.bad(".parameters: must be an object (a Schema)")
	case !isNull(jsonParams) && !isObj(jsonParams):
		return dst, "", p.bad(".parametersJsonSchema: must be an object (a JSON schema)")
	}
	if !gc.allows(name) {
		return dst, "", nil
	}
	dst = sep(dst)
	dst = append(dst, `{"type":"function","function":{"name":`...)
	dst = append(dst, name...)
	if isStr(desc) {
		dst = appendRawMember(dst, "description", desc)
	}
	dst = append(dst, `,"parameters":`...)
	switch {
	case !isNull(params):
		pp := p.member("parameters")
		var err *Error
		if dst, err = appendGeminiSchema(dst, params, &pp); err != nil {
			return dst, "", err
		}
	case !isNull(jsonParams):
		dst = append(dst, jsonParams...)
	default:
		dst = append(dst, `{"type":"object","properties":{}}`...)
	}
	return append(dst, `}}`...), name, nil
}

// appendGeminiSchema writes a Schema of Google's OpenAPI subset as JSON
// Schema: types lowercased, nullable folded into the type (and into enum
// and anyOf), propertyOrdering and example dropped, counts written as
// numbers (the proto's int64s may come as strings). Members it does not know
// pass as they are, so that a JSON schema sent as parameters survives.
func appendGeminiSchema(dst []byte, v string, p *loc) ([]byte, *Error) {
	dst, se := appendSchema(dst, v)
	if se != nil {
		return dst, p.bad(se.at + se.msg)
	}
	return dst, nil
}

// schemaFault is what is wrong inside a schema, and where, relative to it
// (".properties.city.type"). A schema is converted recursively; a loc chain
// through the recursion would escape to the heap at every level, so the
// path is only spelled out, on the way back up, when there is a fault.
type schemaFault struct{ at, msg string }

// within puts the fault under the member or element sub of the schema.
func (f *schemaFault) within(sub string) *schemaFault {
	f.at = sub + f.at
	return f
}

func appendSchema(dst []byte, v string) ([]byte, *schemaFault) {
	it, ok := objIter(v)
	if !ok {
		return dst, &schemaFault{msg: ": must be an object (a Schema)"}
	}
	var typ string
	nullable := false
	for {
		k, val, ok := it.next()
		if !ok {
			break
		}
		switch k {
		case "type":
			firstOf(&typ, val)
		case "nullable":
			nullable = val == "true"
		}
	}
	dst = append(dst, '{')
	if isStr(typ) && !strings.EqualFold(inner(typ), "TYPE_UNSPECIFIED") {
		dst = append(dst, `"type":`...)
		if nullable {
			dst = append(dst, '[')
		}
		dst = append(dst, '"')
		for _, c := range []byte(inner(typ)) {
			if c >= 'A' && c <= 'Z' {
				c += 'a' - 'A'
			}
			dst = append(dst, c)
		}
		dst = append(dst, '"')
		if nullable {
			dst = append(dst, `,"null"]`...)
		}
	} else if !isNull(typ) && !isStr(typ) {
		dst = appendRawMember(dst, "type", typ) // a JSON schema's type array
	}
	it, _ = objIter(v)
	for {
		k, val, ok := it.next()
		if !ok {
			break
		}
		name := geminiKey(k)
		var err *schemaFault
		switch name {
		case "type", "nullable", "propertyOrdering", "example":
		case "format":
			if !strEq(val, "enum") { // Google's marker of a string enum
				dst = appendRawMember(dst, name, val)
			}
		case "properties":
			pi, ok := objIter(val)
			if !ok {
				return dst, &schemaFault{at: ".properties", msg: ": must be an object of schemas"}
			}
			dst = append(dst, `,"properties":{`...)
			first := true
			for {
				pk, pv, ok := pi.next()
				if !ok {
					break
				}
				if !first {
					dst = append(dst, ',')
				}
				first = false
				dst = append(dst, '"')
				dst = append(dst, pk...)
				dst = append(dst, `":`...)
				if dst, err = appendSchema(dst, pv); err != nil {
					return dst, err.within(".properties." + pk)
				}
			}
			dst = append(dst, '}')
		case "items":
			dst = key(dst, "items")
			if dst, err = appendSchema(dst, val); err != nil {
				err = err.within(".items")
			}
		case "anyOf":
			ai, ok := arrIter(val)
			if !ok {
				return dst, &schemaFault{at: ".anyOf", msg: ": must be an array of schemas"}
			}
			dst = key(dst, "anyOf")
			dst = append(dst, '[')
			for j := 0; ; j++ {
				s, ok := ai.elem()
				if !ok {
					break
				}
				dst = sep(dst)
				if dst, err = appendSchema(dst, s); err != nil {
					return dst, err.within(".anyOf." + strconv.Itoa(j))
				}
			}
			if nullable && !isStr(typ) {
				dst = append(dst, `,{"type":"null"}`...)
			}
			dst = append(dst, ']')
		case "enum":
			if nullable && isArr(val) && !isEmptyArr(val) {
				// A nullable enum takes null too.
				t := trimJSON(val)
				dst = key(dst, "enum")
				dst = append(dst, t[:len(t)-1]...)
				dst = append(dst, ",null]"...)
			} else {
				dst = appendRawMember(dst, "enum", val)
			}
		case "minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties":
			if isStr(val) {
				if n, ok := toInt(inner(val)); ok {
					dst = key(dst, name)
					dst = appendInt(dst, n)
					continue
				}
			}
			dst = appendRawMember(dst, name, val)
		default:
			dst = appendRawMember(dst, k, val)
		}
		if err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}
