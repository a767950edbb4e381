package caddymodule

// The model lists, answered by the gate from the key's cached entitlement:
// no lane, no upstream call. GET /v1/models answers the OpenAI list,
// GET /compat/v1/models (or any list asked with anthropic-version) the
// messages API's; GET .../v1/models/{id} one model in the same style.

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/translate"
)

// modelsOwner is the owned_by of the OpenAI list.
const modelsOwner = "timeblock"

// Page sizes of the messages-style list (the messages API's limit parameter).
const (
	defaultModelsLimit = 20
	maxModelsLimit     = 1000
)

// serveModels answers a model list, or one model when ep is epModel.
func (g *Gate) serveModels(w http.ResponseWriter, r *http.Request, ep gateEndpoint, id string, format translate.Format, ent *accounts.Entitlement, now time.Time) error {
	g.state.metrics.laneless[lanelessModels].Inc()
	g.state.lastUsed.Record(ent.KeyID, ent.Combined, now)
	models := ent.Models(now, make([]accounts.HeldModel, 0, 4))
	var body []byte
	if ep == epModel {
		i := indexModel(models, id)
		if i < 0 {
			return g.reject(w, format, rejectModelNotHeld, http.StatusNotFound, "model_not_found",
				"model "+strconv.Quote(id)+" is not available with this key; "+holdsText(models), 0, ent)
		}
		if format == translate.Messages {
			body = appendMessagesModel(nil, &models[i])
		} else {
			body = appendOpenAIModel(nil, &models[i])
		}
	} else if format == translate.Messages {
		var msg string
		body, msg = appendMessagesModelPage(nil, models, r.URL.Query())
		if msg != "" {
			return g.reject(w, format, rejectBadRequest, http.StatusBadRequest, "", msg, 0, ent)
		}
	} else {
		body = append(body, `{"object":"list","data":[`...)
		for i := range models {
			if i > 0 {
				body = append(body, ',')
			}
			body = appendOpenAIModel(body, &models[i])
		}
		body = append(body, "]}"...)
	}
	return writeJSONBody(w, http.StatusOK, body)
}

func indexModel(models []accounts.HeldModel, id string) int {
	for i := range models {
		if models[i].ID == id {
			return i
		}
	}
	return -1
}

// holdsText says which models the key holds, for a 404 naming another.
func holdsText(models []accounts.HeldModel) string {
	if len(models) == 0 {
		return "it holds no model now"
	}
	var b strings.Builder
	b.WriteString("it holds: ")
	for i := range models {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(models[i].ID)
	}
	return b.String()
}

func appendOpenAIModel(dst []byte, m *accounts.HeldModel) []byte {
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

func appendMessagesModel(dst []byte, m *accounts.HeldModel) []byte {
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
func appendMessagesModelPage(dst []byte, models []accounts.HeldModel, q map[string][]string) ([]byte, string) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	limit := defaultModelsLimit
	if v := get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxModelsLimit {
			return dst, "limit: must be an integer from 1 to " + strconv.Itoa(maxModelsLimit) + ", got " + strconv.Quote(v)
		}
		limit = n
	}
	lo, hi := 0, len(models)
	after, before := get("after_id"), get("before_id")
	if after != "" {
		lo = indexModel(models, after) + 1
		if lo == 0 {
			lo = hi
		}
	}
	if before != "" {
		if i := indexModel(models, before); i >= 0 {
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

// writeJSONBody answers a whole JSON body the plugin built itself.
func writeJSONBody(w http.ResponseWriter, status int, body []byte) error {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, err := w.Write(body)
	return err
}
