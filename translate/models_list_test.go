package translate

import (
	"testing"
	"time"
)

func TestModelList(t *testing.T) {
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	models := []ListedModel{
		{ID: "a", Name: "Model A", Since: since, MaxOutputTokens: 4096},
		{ID: "b", Name: "b"},
		{ID: "c", Name: "c"},
	}
	cases := []struct {
		f     Format
		query string
		want  string
		msg   bool
	}{
		{Chat, "limit=1", `{"object":"list","data":[{"id":"a","object":"model","created":` + "1767323045" + `,"owned_by":"timeblock"},` +
			`{"id":"b","object":"model","created":0,"owned_by":"timeblock"},{"id":"c","object":"model","created":0,"owned_by":"timeblock"}]}`, false},
		{Messages, "limit=1&after_id=a", `{"data":[{"type":"model","id":"b","display_name":"b","created_at":"1970-01-01T00:00:00Z"}],` +
			`"has_more":true,"first_id":"b","last_id":"b"}`, false},
		{Messages, "before_id=b", `{"data":[{"type":"model","id":"a","display_name":"Model A","created_at":"2026-01-02T03:04:05Z","max_tokens":4096}],` +
			`"has_more":false,"first_id":"a","last_id":"a"}`, false},
		{Messages, "after_id=nope", `{"data":[],"has_more":false,"first_id":null,"last_id":null}`, false},
		{Messages, "limit=0", "", true},
	}
	for _, c := range cases {
		got, msg := AppendModelList(nil, c.f, models, c.query)
		if (msg != "") != c.msg || string(got) != c.want {
			t.Errorf("%v ?%s: %s (message %q), want %s", c.f, c.query, got, msg, c.want)
		}
	}
	if got := string(AppendModel(nil, Messages, &models[1])); got != `{"type":"model","id":"b","display_name":"b","created_at":"1970-01-01T00:00:00Z"}` {
		t.Errorf("one model: %s", got)
	}
}
