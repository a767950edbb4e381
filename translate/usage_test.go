package translate

import "testing"

// Streamed fragments must count the same bytes as the whole they build, or
// the reasoning-token estimate differs between streamed and whole answers.
func TestUsageByteCounts(t *testing.T) {
	whole := `{"city":"Zürich","note":"a \"quote\""}`
	fragments := []string{`"{\"city\":\"Z\u00fcr"`, `"ich\",\"note\":\"a \\\"quote\\\"\"}"`}
	var n int64
	for _, f := range fragments {
		n += decodedLen(f)
	}
	if n != int64(len(whole)) {
		t.Errorf("fragments count %d bytes, the input object has %d", n, len(whole))
	}
	if got := decodedLen(`"\ud83d\ude00"`); got != 4 {
		t.Errorf("a surrogate pair counts %d bytes, want 4", got)
	}

	calls := `[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]`
	deltas := []string{
		`[{"index":0,"id":"c1","type":"function","function":{"name":"f","arguments":""}}]`,
		`[{"index":0,"function":{"arguments":"{\"a\""}}]`,
		`[{"index":0,"function":{"arguments":":1}"}}]`,
	}
	var streamed int64
	for _, d := range deltas {
		streamed += argBytes(d)
	}
	if whole := argBytes(calls); streamed != whole || whole != int64(len(`{\"a\":1}`)) {
		t.Errorf("streamed deltas count %d, the whole tool_calls %d", streamed, whole)
	}
}
