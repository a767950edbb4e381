package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/timeblock/timeblock/caddymodule/e2e"
)

func TestMain(m *testing.M) { e2e.Main(m) }

// TestQuickRun runs every phase of the benchmark in its smallest form, so
// that the program keeps working as the plugin changes. Its figures mean
// nothing.
func TestQuickRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts caddy and sends a few thousand requests")
	}
	o := defaults()
	o.quick()
	o.caddyBin = e2e.Binary(t)
	var out, log bytes.Buffer
	if err := run(o, &out, &log); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	report := out.String()
	t.Log("\n" + report)
	for _, want := range []string{
		"upstream direct", "reverse_proxy stream",
		"gate chat→chat (key)", "gate messages→chat (combined key)", "gate messages→chat stream (combined key)",
		"chunk flushing", "slow streams", "target (issue 6)",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("the report has no %q", want)
		}
	}
}
