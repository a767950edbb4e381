package translate

// Gemini's model list: GET .../v1beta/models, paged by pageSize (default
// 50, at most 1000) and pageToken (the nextPageToken of the page before);
// GET .../v1beta/models/{model} for one. Models are named models/{id}.

import (
	"encoding/base64"
	"net/url"
	"strconv"
)

const (
	defaultGeminiPageSize = 50
	maxGeminiPageSize     = 1000
)

// geminiMethodNames are the generation methods every listed model supports.
const geminiMethodNames = `["generateContent","streamGenerateContent","countTokens"]`

func appendGeminiModel(dst []byte, m *ListedModel) []byte {
	dst = append(dst, `{"name":`...)
	dst = appendStr(dst, "models/"+m.ID)
	dst = append(dst, `,"baseModelId":`...)
	dst = appendStr(dst, m.ID)
	dst = append(dst, `,"version":"1","displayName":`...)
	dst = appendStr(dst, m.Name)
	if m.MaxOutputTokens > 0 {
		dst = append(dst, `,"outputTokenLimit":`...)
		dst = strconv.AppendInt(dst, int64(m.MaxOutputTokens), 10)
	}
	dst = append(dst, `,"supportedGenerationMethods":`+geminiMethodNames...)
	return append(dst, '}')
}

// appendGeminiModelList appends one page of models; the page token is the
// next model's id, base64url, so a client passes it back unchanged.
func appendGeminiModelList(dst []byte, models []ListedModel, rawQuery string) ([]byte, string) {
	q, _ := url.ParseQuery(rawQuery)
	size := defaultGeminiPageSize
	if v := q.Get("pageSize"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return dst, "pageSize: must be a non-negative integer, got " + strconv.Quote(v)
		}
		if n > 0 {
			size = min(n, maxGeminiPageSize)
		}
	}
	lo := 0
	if tok := q.Get("pageToken"); tok != "" {
		id, err := base64.RawURLEncoding.DecodeString(tok)
		if lo = indexListed(models, string(id)); err != nil || lo < 0 {
			return dst, "pageToken: " + strconv.Quote(tok) + " is not a token this list gave; start again without it"
		}
	}
	hi := min(len(models), lo+size)
	dst = append(dst, `{"models":[`...)
	for i := lo; i < hi; i++ {
		if i > lo {
			dst = append(dst, ',')
		}
		dst = appendGeminiModel(dst, &models[i])
	}
	dst = append(dst, ']')
	if hi < len(models) {
		dst = append(dst, `,"nextPageToken":"`...)
		dst = base64.RawURLEncoding.AppendEncode(dst, []byte(models[hi].ID))
		dst = append(dst, '"')
	}
	return append(dst, '}'), ""
}
