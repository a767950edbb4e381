package translate

// Readers of chat completions, whole and streamed. Two writers take chat as
// their input: the messages client's (chat upstream → messages) and the
// Responses client's (which reads the chat chunks or the chat completion
// that chat is translated to). They read chat here, once; what each does
// with a member stays with the writer. All values are raw slices of the
// input ("" when absent); nothing allocates.

// chatTop holds the top-level members of a chat completion or chunk.
type chatTop struct {
	id, model, created, choices, usage, err string
}

// set records the chunk's top-level member k.
func (t *chatTop) set(k, v string) {
	switch k {
	case "id":
		t.id = v
	case "model":
		t.model = v
	case "created":
		t.created = v
	case "choices":
		t.choices = v
	case "usage":
		t.usage = v
	case "error":
		t.err = v
	}
}

// chunkChoice is one element of a chunk's choices.
type chunkChoice struct {
	index, finish string
	delta         string // the delta member
	// deltaOrMessage is delta, or message as some servers name it in a
	// chunk (whichever comes last). The Responses writer reads only delta:
	// its chunks come from this package's own chat writer.
	deltaOrMessage string
	matched        string // stop_reason or matched_stop as a string (vLLM, SGLang): the stop string that matched
}

// chunkDelta holds the members of a chunk's delta.
type chunkDelta struct {
	content, reasoningContent, reasoning, refusal, toolCalls, functionCall string
}

// set records the delta's member k.
func (x *chunkDelta) set(k, v string) {
	switch k {
	case "content":
		x.content = v
	case "reasoning_content":
		x.reasoningContent = v
	case "reasoning":
		x.reasoning = v
	case "refusal":
		x.refusal = v
	case "tool_calls":
		x.toolCalls = v
	case "function_call":
		x.functionCall = v
	}
}

// readToolCallDelta reads one element of a delta's tool_calls: its index,
// its id and its function's name and arguments.
func readToolCallDelta(c string) (idx, id, name, args string) {
	var fn string
	it, _ := objIter(c)
	for {
		k, v, ok := it.next()
		if !ok {
			break
		}
		switch k {
		case "index":
			idx = v
		case "id":
			id = v
		case "function":
			fn = v
		}
	}
	return idx, id, field(fn, "name"), field(fn, "arguments")
}

// chatCompletion is what the writers read of a whole chat completion: its
// top-level members and its first choice (a translated client asked for
// one).
type chatCompletion struct {
	chatTop
	a     answer // the first choice's message and finish_reason
	calls string // its message's tool_calls
	// stopReason and matchedStop: the first choice's (vLLM, SGLang).
	stopReason, matchedStop string
	u                       usage
}

// read walks the completion once, where its members stand: the first
// choice and its message are read inside the choices array, not found and
// then read again. Of duplicated members the last counts at the top level
// and within a message, the first within a choice.
func (cc *chatCompletion) read(s string) {
	top := cursor{s: s}
	top.obj()
	for {
		k, ok := top.key()
		if !ok {
			break
		}
		if k == "choices" {
			at := top.begin()
			cc.readChoices(&top)
			cc.choices = top.finish(at, nil)
			continue
		}
		cc.set(k, top.raw())
	}
	cc.u.readChat(cc.usage)
}

// readChoices reads the first element of the choices array at c (c moves
// past the choices, whatever they are).
func (cc *chatCompletion) readChoices(c *cursor) {
	cc.a, cc.calls, cc.stopReason, cc.matchedStop = answer{}, "", "", ""
	if !c.arr() {
		return
	}
	if !c.more() {
		return // an empty array
	}
	if c.obj() {
		cc.readChoice(c)
	}
	for c.more() { // the other choices, or a first that is not an object
	}
}

// readChoice reads the choice object at c, moving c past it.
func (cc *chatCompletion) readChoice(c *cursor) {
	var r chatMessageReader
	var message, finish bool
	for {
		k, ok := c.key()
		if !ok {
			break
		}
		switch k {
		case "message":
			if !message && c.obj() {
				for {
					mk, ok := c.key()
					if !ok {
						break
					}
					r.member(&cc.a, mk, c.raw())
				}
			}
			message = true
		case "finish_reason":
			if f := c.raw(); !finish && isStr(f) {
				cc.a.stop = chatFinish(f)
			}
			finish = true
		case "stop_reason":
			if v := c.raw(); cc.stopReason == "" {
				cc.stopReason = v
			}
		case "matched_stop":
			if v := c.raw(); cc.matchedStop == "" {
				cc.matchedStop = v
			}
		}
	}
	cc.calls = r.finish(&cc.a)
}

// readChatCall reads one of a message's tool_calls: its id ("" unless a
// string) and its function's name and arguments.
func readChatCall(c string) (id, name, args string) {
	fn := field(c, "function")
	if id = field(c, "id"); !isStr(id) {
		id = ""
	}
	return id, field(fn, "name"), field(fn, "arguments")
}
