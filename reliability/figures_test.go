//go:build reliability

package reliability

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/timeblock/timeblock/caddymodule/e2e"
)

// soak selects the longer version of every scenario.
var soak = flag.Bool("soak", false, "run the longer version of every scenario")

// scale returns quick normally and long under -soak.
func scale(quick, long int) int {
	if *soak {
		return long
	}
	return quick
}

// A figure is one number a scenario measured and the bound it must meet.
type figure struct {
	name  string // what was counted, e.g. "seats oversold (postgres, 2 nodes)"
	value float64
	unit  string // e.g. "seats", "ms", "reads"
	bound string // the rule, for the table, e.g. "= 0" or "≤ 1000 ms"
	ok    bool
	test  string
}

var (
	figuresMu sync.Mutex
	figures   []figure
)

// Zero records a count that must be zero.
func Zero(t *testing.T, name string, value int, unit string) {
	t.Helper()
	record(t, figure{name: name, value: float64(value), unit: unit, bound: "= 0", ok: value == 0})
}

// AtMost records a value that must not exceed max.
func AtMost(t *testing.T, name string, value, max float64, unit string) {
	t.Helper()
	record(t, figure{name: name, value: value, unit: unit, bound: fmt.Sprintf("≤ %g %s", max, unit), ok: value <= max})
}

// AtLeast records a value that must reach min.
func AtLeast(t *testing.T, name string, value, min float64, unit string) {
	t.Helper()
	record(t, figure{name: name, value: value, unit: unit, bound: fmt.Sprintf("≥ %g %s", min, unit), ok: value >= min})
}

// Exactly records a value that must equal want.
func Exactly(t *testing.T, name string, value, want float64, unit string) {
	t.Helper()
	record(t, figure{name: name, value: value, unit: unit, bound: fmt.Sprintf("= %g %s", want, unit), ok: value == want})
}

// Info records a figure with no bound: context for the others (how many
// requests ran, how many were cancelled).
func Info(t *testing.T, name string, value float64, unit string) {
	t.Helper()
	record(t, figure{name: name, value: value, unit: unit, bound: "", ok: true})
}

func record(t *testing.T, f figure) {
	t.Helper()
	f.test = t.Name()
	figuresMu.Lock()
	figures = append(figures, f)
	figuresMu.Unlock()
	t.Logf("figure: %s = %s %s (%s)", f.name, trim(f.value), f.unit, f.bound)
	if !f.ok {
		t.Errorf("figure %q is %s %s, must be %s", f.name, trim(f.value), f.unit, f.bound)
	}
}

func trim(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := e2e.Run(m)
	printFigures()
	os.Exit(code)
}

// printFigures writes the table CI shows, grouped by test.
func printFigures() {
	figuresMu.Lock()
	defer figuresMu.Unlock()
	if len(figures) == 0 {
		return
	}
	sort.SliceStable(figures, func(i, j int) bool { return figures[i].test < figures[j].test })
	fmt.Println()
	fmt.Println("Reliability figures")
	fmt.Printf("%-4s  %-64s  %12s  %-8s  %s\n", "", "figure", "value", "unit", "bound")
	failed := 0
	for _, f := range figures {
		mark := "ok"
		if !f.ok {
			mark = "FAIL"
			failed++
		}
		fmt.Printf("%-4s  %-64s  %12s  %-8s  %s\n", mark, f.name, trim(f.value), f.unit, f.bound)
	}
	fmt.Printf("%d figures, %d failed\n", len(figures), failed)
}
