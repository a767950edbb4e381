package caddymodule

// The gate reads an inference body once: it checks the size and the JSON,
// finds the fields it acts on in one pass over the top level, and rewrites
// the body only when it must (an output limit above the pool's ceiling,
// priority).

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/timeblock/timeblock/translate"
)

var errBodyTooLarge = errors.New("request body too large")

// errBodyEncoded refuses a compressed body: the gate and the translator read
// the JSON, and a model server would get bytes nobody checked.
var errBodyEncoded = errors.New("a request body with a Content-Encoding is not accepted; send the JSON uncompressed")

// readBody reads the whole request body into a pooled buffer, refusing more
// than limit bytes; the caller holds the buffer once and releases it. With a
// Content-Length it reads into one buffer of that size. No body is nil.
func readBody(r *http.Request, limit int64) (*sharedBody, error) {
	if ce := headerValue(r.Header, "Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
		return nil, errBodyEncoded
	}
	if r.ContentLength > limit {
		return nil, errBodyTooLarge
	}
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	size := int64(512)
	if r.ContentLength > 0 {
		size = r.ContentLength + 1 // room to see EOF without growing
	}
	lr := &io.LimitedReader{R: r.Body, N: limit + 1}
	sb := newSharedBody(int(size))
	buf := sb.mem
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := lr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			sb.release()
			return nil, err
		}
	}
	sb.fill(buf)
	if int64(len(buf)) > limit {
		sb.release()
		return nil, errBodyTooLarge
	}
	return sb, nil
}

// inferenceFields are the top-level fields of a request body the gate acts on.
type inferenceFields struct {
	model string
	// maxTokens is the output limit, in the field the format names it
	// (maxTokensName: translate's OutputLimitField), or in the member
	// maxTokensInner of that field, where the format nests it.
	maxTokens                     gjson.Result
	maxTokensName, maxTokensInner string
	maxCompletionTokens           gjson.Result // chat's newer name for the same limit (MaxCompletionTokensField)
	priority                      bool         // the client sent a priority of its own
}

// scanInference checks that body is one JSON object with a model and reads
// the fields the gate acts on in a request of format; the error says what to
// fix. pathModel is the model the path names (the Gemini API's), which the
// body then does not.
func scanInference(body []byte, format translate.Format, pathModel string) (inferenceFields, error) {
	limit := format.OutputLimitField()
	nested := strings.IndexByte(limit, '.') >= 0 // Gemini's generationConfig.maxOutputTokens
	f := inferenceFields{maxTokensName: limit, model: pathModel}
	if len(body) == 0 {
		if pathModel != "" {
			return f, errors.New("request body is empty; send a JSON object with " + format.InputField())
		}
		return f, errors.New("request body is empty; send a JSON object with model and " + format.InputField())
	}
	// JSON nested no deeper than the translator takes, checked in the same
	// pass that finds the fields, so that the translator need not check it
	// again (TranslateValidRequest).
	var modelErr error
	terr := translate.CheckBodyMembers(body, func(k, v string) {
		if strings.IndexByte(k, '\\') >= 0 {
			k = gjson.Parse(k).Str // an escaped key: read it as JSON does
		} else {
			k = k[1 : len(k)-1]
		}
		switch k {
		case "model":
			if pathModel != "" {
				return // the path names it
			}
			m := gjson.Parse(v)
			if m.Type != gjson.String || m.Str == "" {
				modelErr = errors.New("model must be a non-empty string")
				return
			}
			// A view into the body unless the name has escapes, valid until
			// rewriteBody edits the body in place; after admission the gate
			// uses the grant's name (Admission.Model).
			f.model = m.Str
		case limit:
			f.maxTokens = gjson.Parse(v)
		case translate.MaxCompletionTokensField:
			f.maxCompletionTokens = gjson.Parse(v)
		case translate.PriorityField:
			f.priority = true
		default:
			// A nested limit, found where the body keeps it (under either
			// of the Gemini API's spellings).
			if nested {
				if inner, raw, ok := format.OutputLimitIn(k, v); ok {
					f.maxTokensName, f.maxTokensInner, f.maxTokens = k, inner, gjson.Parse(raw)
				}
			}
		}
	})
	switch {
	case terr != nil:
		return f, errors.New(terr.Message)
	case !bytes.HasPrefix(bytes.TrimLeft(body, " \t\r\n"), []byte("{")):
		return f, errors.New("request body must be a JSON object")
	}
	if modelErr != nil {
		return f, modelErr
	}
	if f.model == "" {
		return f, errors.New("model is required")
	}
	return f, nil
}

// rewriteBody applies the gate's edits: the output limit (max_tokens, chat's
// max_completion_tokens, responses' max_output_tokens) above maxOut is
// lowered to it, and on chat requests priority is set to -boosts while boost
// members are open and removed otherwise, since only the gate decides who
// runs first (a messages or responses body has no priority; the translator
// writes it when it builds a chat body). It returns body itself when nothing
// changes, and whether the limit was clamped. The edits are made in place
// where they fit, so f's fields are not read after it.
func rewriteBody(body []byte, f *inferenceFields, maxOut int, chat bool, boosts int) ([]byte, bool, error) {
	var err error
	clamped := false
	opts := &sjson.Options{Optimistic: true, ReplaceInPlace: true}
	if maxOut > 0 {
		for _, field := range [...]struct {
			name string
			v    gjson.Result
		}{{f.maxTokensName, f.maxTokens}, {translate.MaxCompletionTokensField, f.maxCompletionTokens}} {
			if field.v.Type != gjson.Number || field.v.Num <= float64(maxOut) {
				continue
			}
			if field.name == f.maxTokensName && f.maxTokensInner != "" {
				field.name += "." + f.maxTokensInner
			}
			if body, err = sjson.SetRawBytesOptions(body, field.name, strconv.AppendInt(nil, int64(maxOut), 10), opts); err != nil {
				return nil, false, fmt.Errorf("clamping %s: %w", field.name, err)
			}
			clamped = true
		}
	}
	if chat && (boosts > 0 || f.priority) {
		if boosts > 0 {
			body, err = sjson.SetRawBytesOptions(body, translate.PriorityField, strconv.AppendInt(nil, int64(-boosts), 10), opts)
		} else {
			body, err = sjson.DeleteBytesOptions(body, translate.PriorityField, opts)
		}
		if err != nil {
			return nil, false, fmt.Errorf("setting priority: %w", err)
		}
	}
	return body, clamped, nil
}

// forwardedBody is the request body the gate forwards, after its rewrites:
// the request's Body, and its GetBody for a retry. The gate leaves it in
// VarBody; the translator reads the bytes from it and, when it rewrites
// them, puts the new ones in it. The values of the request headers set on
// the way live in it too, and so does the translator's response writer: a
// translated request costs one allocation for what the gate and the
// translator keep of it.
//
// The bytes are in a pooled buffer (body_buffers.go). The forwarded body
// holds it until the handler that made it (setBody) calls release as it
// returns, and the readers hold it until the transport closes them. When
// the translator replaces the body, the one it replaced is let go at once:
// a stream holds one buffer, not two.
type forwardedBody struct {
	cur    *sharedBody
	curGen uint32
	rd     bodyReader // the request's Body
	hdr    headerValues
	tw     translateWriter
	// twTaken: tw serves a response already (a second translator on the
	// same request makes its own).
	twTaken bool
	// The tokens the upstream reported for the response (input, cached
	// included, and output), as far as the translator saw them; the gate
	// counts them in the key's usage.
	inputTokens, outputTokens int64
}

// Bytes returns the body as forwarded. It is valid until release.
func (b *forwardedBody) Bytes() []byte { return b.cur.data }

// rewind is the request's GetBody: a new reader of the body, while the
// request lasts.
func (b *forwardedBody) rewind() (io.ReadCloser, error) {
	rd := new(bodyReader)
	if !rd.open(b.cur, b.curGen) {
		return nil, errBodyGone
	}
	return rd, nil
}

// setBody makes sb the request's body and returns it as forwarded, taking
// over the caller's hold of sb; the caller releases the forwarded body when
// its handler returns.
func setBody(r *http.Request, sb *sharedBody) *forwardedBody {
	fb := new(forwardedBody)
	fb.replace(r, sb)
	r.GetBody = fb.rewind
	return fb
}

// replace makes sb the bytes that fb forwards as r's body (setBody made fb
// r's body and its GetBody), taking over the caller's hold of sb and
// letting go of the bytes it forwarded before.
func (b *forwardedBody) replace(r *http.Request, sb *sharedBody) {
	old := b.cur
	b.cur, b.curGen = sb, sb.gen()
	b.rd.open(sb, b.curGen) // held: this cannot fail
	old.release()
	r.Body = &b.rd
	r.ContentLength = int64(len(sb.data))
	r.TransferEncoding = nil
	b.hdr.setLength(r.Header, len(sb.data))
}

// release lets go of the body when the handler that made fb returns, and
// closes the request's Body: a handler that answered without sending the
// request on (a token count estimated here, a respond) never closed it. A
// transport still writing the body of a request whose response is done
// gets an error for the rest; bodies GetBody handed out stay open.
func (b *forwardedBody) release() {
	b.rd.Close()
	b.cur.release()
}

// isDecimal tells whether s is n in decimal, without allocating.
func isDecimal(s string, n int) bool {
	var buf [20]byte
	return s == string(strconv.AppendInt(buf[:0], int64(n), 10))
}
