package translate

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// FuzzValidate: any body, Chat or Messages client, every configuration: no
// panic; a body the validator refuses is a 400 on every path; a body it
// accepts is translated (or passed through) to a JSON object, or refused
// with a 400 for what the upstream cannot carry — never a 5xx-class error.
func FuzzValidate(f *testing.F) {
	for _, shapes := range refusedShapes {
		for _, c := range shapes {
			f.Add([]byte(c.body))
		}
	}
	for _, bodies := range acceptedShapes {
		for _, b := range bodies {
			f.Add([]byte(b))
		}
	}
	seedClientBodies(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		s := trimJSON(string(body))
		object := isObj(s) && gjson.Valid(s) && maxDepth(s, DefaultMaxDepth) <= DefaultMaxDepth
		for _, client := range []Format{Chat, Messages} {
			var verr *Error
			if object {
				verr = validateBody(client, s)
				if verr != nil && (verr.Status != 400 || verr.Kind != InvalidRequest) {
					t.Fatalf("validator: %d %s", verr.Status, verr.Kind)
				}
			}
			for i := range fuzzConfigs {
				cfg := &fuzzConfigs[i]
				out, _, err := TranslateRequest(client, body, cfg, nil)
				switch {
				case err != nil && err.Status != 400 && err.Status != 413:
					t.Fatalf("%v -> %v: status %d: %v", client, cfg.Upstream, err.Status, err)
				case verr != nil && err == nil:
					t.Fatalf("%v -> %v: the validator refuses (%v) but the path accepts:\n%s", client, cfg.Upstream, verr, body)
				case err == nil && !gjson.ValidBytes(out):
					t.Fatalf("%v -> %v: upstream body is not JSON: %s", client, cfg.Upstream, out)
				case err == nil && !strings.HasPrefix(string(out), "{"):
					t.Fatalf("%v -> %v: upstream body is not an object: %s", client, cfg.Upstream, out)
				}
			}
		}
	})
}
