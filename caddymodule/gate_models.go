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

	"github.com/timeblock/timeblock/accounts"
	"github.com/timeblock/timeblock/translate"
)

// serveModels answers a model list, or one model when ep is epModel, in the
// shape of the client's format (translate/models_list.go).
func (g *Gate) serveModels(w http.ResponseWriter, r *http.Request, ep gateEndpoint, id string, format translate.Format, ent *accounts.Entitlement, now time.Time) error {
	g.state.metrics.laneless[lanelessModels].Inc()
	g.state.lastUsed.Record(ent.KeyID, ent.Combined, now)
	models := ent.Models(now, make([]accounts.HeldModel, 0, 4))
	if ep == epModel || ep == epGeminiModel {
		i := indexModel(models, id)
		if i < 0 {
			return g.reject(w, format, rejectModelNotHeld, http.StatusNotFound, "model_not_found",
				"model "+strconv.Quote(id)+" is not available with this key; "+holdsText(models), 0, ent)
		}
		m := listedModel(&models[i])
		return writeJSONBody(w, http.StatusOK, translate.AppendModel(nil, format, &m))
	}
	var buf [8]translate.ListedModel
	listed := buf[:0]
	for i := range models {
		listed = append(listed, listedModel(&models[i]))
	}
	body, msg := translate.AppendModelList(nil, format, listed, r.URL.RawQuery)
	if msg != "" {
		return g.reject(w, format, rejectBadRequest, http.StatusBadRequest, "", msg, 0, ent)
	}
	return writeJSONBody(w, http.StatusOK, body)
}

// listedModel is a model the key holds, as a list shows it.
func listedModel(m *accounts.HeldModel) translate.ListedModel {
	return translate.ListedModel{ID: m.ID, Name: m.Name, Since: m.Since, MaxOutputTokens: m.MaxOutputTokens}
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

// writeJSONBody answers a whole JSON body the plugin built itself.
func writeJSONBody(w http.ResponseWriter, status int, body []byte) error {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, err := w.Write(body)
	return err
}
