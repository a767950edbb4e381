//go:build reliability

package reliability

import (
	"net/http"
	"testing"

	"github.com/timeblock/timeblock/caddymodule/e2e"
)

// TestSuiteRuns starts one node and counts server errors on the root path:
// the smallest scenario, so the suite's own plumbing is exercised.
func TestSuiteRuns(t *testing.T) {
	c := e2e.Start(t, `
:{{.HTTP}} {
	respond "ok"
}`)
	errs := 0
	for range 10 {
		resp, err := http.Get(c.URL())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			errs++
		}
	}
	Zero(t, "server errors on a plain site (suite plumbing)", errs, "answers")
}
