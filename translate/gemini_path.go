package translate

// Gemini names the model and what to do with it in the request path, not
// the body: POST .../v1beta/models/{model}:generateContent, and so on. The
// model may hold slashes (Qwen/Qwen3-32B); the method follows the last
// colon.

import "strings"

// GeminiMethod is what a Gemini path asks of its model.
type GeminiMethod uint8

const (
	// GeminiNone is a path that is not a Gemini model path.
	GeminiNone GeminiMethod = iota
	// GeminiGenerate is POST models/{model}:generateContent.
	GeminiGenerate
	// GeminiStream is POST models/{model}:streamGenerateContent (SSE with ?alt=sse).
	GeminiStream
	// GeminiCount is POST models/{model}:countTokens.
	GeminiCount
	// GeminiModel is GET models/{model}.
	GeminiModel
	// GeminiModels is GET models, the list.
	GeminiModels
)

// GeminiModelsPath is the path of the Gemini API's model list, under the
// site's Gemini prefix (Caddyfile.example serves it at /gemini).
const GeminiModelsPath = "/v1beta/models"

// geminiMethods are the methods after the colon, as the API names them.
var geminiMethods = [...]struct {
	name string
	m    GeminiMethod
}{
	{"generateContent", GeminiGenerate},
	{"streamGenerateContent", GeminiStream},
	{"countTokens", GeminiCount},
}

// ParseGeminiPath reads a path under .../v1beta/models: the model it names
// (empty for the list) and the method. ok is false when p is not such a
// path, or names a method this server does not serve (embedContent, say).
func ParseGeminiPath(p string) (model string, m GeminiMethod, ok bool) {
	i := strings.Index(p, GeminiModelsPath)
	if i < 0 {
		return "", GeminiNone, false
	}
	rest := p[i+len(GeminiModelsPath):]
	if rest == "" || rest == "/" {
		return "", GeminiModels, true
	}
	if rest[0] != '/' {
		return "", GeminiNone, false
	}
	rest = rest[1:]
	c := strings.LastIndexByte(rest, ':')
	if c < 0 {
		rest = strings.TrimSuffix(rest, "/")
		return rest, GeminiModel, rest != ""
	}
	model, method := rest[:c], rest[c+1:]
	if model == "" {
		return "", GeminiNone, false
	}
	for _, gm := range geminiMethods {
		if method == gm.name {
			return model, gm.m, true
		}
	}
	return "", GeminiNone, false
}

// Call is what is known of a request beside its body. The Gemini API's
// path names the model and whether the answer streams (zero for the formats
// whose body says both); Boost is how many boost members of the key are
// open, which the caller (the gate) decided.
type Call struct {
	Model  string
	Stream bool
	// Boost > 0 puts the request ahead on a chat upstream: a chat body the
	// translation builds from another format gets priority -Boost (vLLM's
	// priority: lower runs first). A chat client's own body is the
	// caller's to edit (PriorityField).
	Boost int
}

// PriorityField is the chat request member that orders requests on the
// upstream (vLLM's --scheduling-policy priority).
const PriorityField = "priority"

// CallFromPath is the Call a request path makes in format f.
func CallFromPath(f Format, p string) Call {
	if f != Gemini {
		return Call{}
	}
	model, m, _ := ParseGeminiPath(p)
	return Call{Model: model, Stream: m == GeminiStream}
}
