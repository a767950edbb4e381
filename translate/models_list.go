package translate

// The model lists, in each format's shape: chat's (OpenAI's GET /v1/models,
// one page, no paging) and the messages API's (paged by limit, after_id and
// before_id). Which models a key holds is not known here; the caller passes
// them in.

import (
	"net/url"
	"strconv"
	"time"

	"github.com/tidwall/gjson"
)

// ListedModel is one model of a list.
type ListedModel struct {
	ID   string // the model id requests name
	Name string // display name
	// Since is when the model became available; zero when unknown.
	Since time.Time
	// MaxOutputTokens is the output ceiling (0: none).
	MaxOutputTokens int
}

// modelsOwner is the owned_by of the chat-style list.
const modelsOwner = "timeblock"

// Page sizes of the messages-style list (the messages API's limit parameter).
const (
	defaultModelsLimit = 20
	maxModelsLimit     = 1000
)

// AppendModel appends m as f's model endpoint (GET .../v1/models/{id})
// answers it, in f's shape.
func AppendModel(dst []byte, f Format, m *ListedModel) []byte {
	c, ok := codecFor(f)
	if !ok {
		c = &codecs[Chat]
	}
	return c.appendModel(dst, m)
}

// AppendModelList appends models as f's list endpoint (GET .../v1/models)
// answers them. A paged list (messages, Gemini) is one page of them, as the
// raw query asks (limit, after_id and before_id; pageSize and pageToken);
// the message returned, when not empty, tells the client which parameter
// is bad.
func AppendModelList(dst []byte, f Format, models []ListedModel, rawQuery string) ([]byte, string) {
	c, ok := codecFor(f)
	if !ok {
		c = &codecs[Chat]
	}
	return c.appendModelList(dst, models, rawQuery)
}

// appendChatModelList is chat's list: one page, no paging.
func appendChatModelList(dst []byte, models []ListedModel, _ string) ([]byte, string) {
	dst = append(dst, `{"object":"list","data":[`...)
	for i := range models {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendChatModel(dst, &models[i])
	}
	return append(dst, "]}"...), ""
}

func appendMessagesModelList(dst []byte, models []ListedModel, rawQuery string) ([]byte, string) {
	q, _ := url.ParseQuery(rawQuery) // as url.URL.Query: a bad pair is left out
	return appendMessagesModelPage(dst, models, q)
}

func indexListed(models []ListedModel, id string) int {
	for i := range models {
		if models[i].ID == id {
			return i
		}
	}
	return -1
}

func appendChatModel(dst []byte, m *ListedModel) []byte {
	dst = append(dst, `{"id":`...)
	dst = gjson.AppendJSONString(dst, m.ID)
	dst = append(dst, `,"object":"model","created":`...)
	created := int64(0)
	if !m.Since.IsZero() {
		created = m.Since.Unix()
	}
	dst = strconv.AppendInt(dst, created, 10)
	dst = append(dst, `,"owned_by":"`+modelsOwner+`"}`...)
	return dst
}

func appendMessagesModel(dst []byte, m *ListedModel) []byte {
	dst = append(dst, `{"type":"model","id":`...)
	dst = gjson.AppendJSONString(dst, m.ID)
	dst = append(dst, `,"display_name":`...)
	dst = gjson.AppendJSONString(dst, m.Name)
	dst = append(dst, `,"created_at":"`...)
	since := m.Since
	if since.IsZero() {
		since = time.Unix(0, 0)
	}
	dst = since.UTC().AppendFormat(dst, time.RFC3339)
	dst = append(dst, '"')
	if m.MaxOutputTokens > 0 {
		dst = append(dst, `,"max_tokens":`...)
		dst = strconv.AppendInt(dst, int64(m.MaxOutputTokens), 10)
	}
	return append(dst, '}')
}

// appendMessagesModelPage appends the messages-style list, one page of it as
// limit, after_id and before_id ask (an id the list does not hold gives an
// empty page). It returns a message for the client when a parameter is bad.
func appendMessagesModelPage(dst []byte, models []ListedModel, q url.Values) ([]byte, string) {
	limit := defaultModelsLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxModelsLimit {
			return dst, "limit: must be an integer from 1 to " + strconv.Itoa(maxModelsLimit) + ", got " + strconv.Quote(v)
		}
		limit = n
	}
	lo, hi := 0, len(models)
	after, before := q.Get("after_id"), q.Get("before_id")
	if after != "" {
		lo = indexListed(models, after) + 1
		if lo == 0 {
			lo = hi
		}
	}
	if before != "" {
		if i := indexListed(models, before); i >= 0 {
			hi = min(hi, i)
		} else {
			hi = lo
		}
	}
	lo = min(lo, hi)
	var more bool
	if before != "" && after == "" {
		// Paging backwards: the page ends just before before_id.
		more = hi-lo > limit
		lo = max(lo, hi-limit)
	} else {
		more = hi-lo > limit
		hi = min(hi, lo+limit)
	}
	page := models[lo:hi]
	dst = append(dst, `{"data":[`...)
	for i := range page {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendMessagesModel(dst, &page[i])
	}
	dst = append(dst, `],"has_more":`...)
	dst = strconv.AppendBool(dst, more)
	dst = append(dst, `,"first_id":`...)
	if len(page) > 0 {
		dst = gjson.AppendJSONString(dst, page[0].ID)
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"last_id":`...)
	if len(page) > 0 {
		dst = gjson.AppendJSONString(dst, page[len(page)-1].ID)
	} else {
		dst = append(dst, "null"...)
	}
	return append(dst, '}'), ""
}
