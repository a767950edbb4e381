package translate

import "strconv"

// A loc names a value in the request body for an error message, as
// messages.3.content.1 does. A translation hands the loc of each message,
// block and item down with it, and only an error spells it out: spelling
// them all, though almost none is ever used, cost a tenth of translating a
// conversation.
type loc struct {
	up   *loc
	name string // a member of up, or of the body when up is nil
	i    int    // an element of up, when name is ""
}

// member is the loc of p's member name.
func (p *loc) member(name string) loc { return loc{up: p, name: name} }

// elem is the loc of p's element i.
func (p *loc) elem(i int) loc { return loc{up: p, i: i} }

// String spells p out, its parts joined by dots.
func (p *loc) String() string {
	part := p.name
	if part == "" {
		part = strconv.Itoa(p.i)
	}
	if p.up == nil {
		return part
	}
	return p.up.String() + "." + part
}

// bad is a 400 whose message is p spelled out, then rest (": …" or ".…").
func (p *loc) bad(rest string) *Error { return badRequest(p.String() + rest) }
