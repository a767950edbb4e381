package caddymodule

import "testing"

// The newest provisioned app serves the operator endpoints; when a new
// config's app is cleaned up (a failed reload), the running one serves again.
func TestLiveApps(t *testing.T) {
	running, reloaded := new(App), new(App)
	registerApp(running)
	t.Cleanup(func() { unregisterApp(running) })
	if got, ok := activeApp(); !ok || got != running {
		t.Fatalf("activeApp = %p, %v; want the running app", got, ok)
	}
	registerApp(reloaded)
	if got, _ := activeApp(); got != reloaded {
		t.Fatalf("after a reload, activeApp = %p; want the new app", got)
	}
	unregisterApp(reloaded)
	if got, _ := activeApp(); got != running {
		t.Fatalf("after the new config failed, activeApp = %p; want the running app", got)
	}
	unregisterApp(running)
	if _, ok := activeApp(); ok {
		t.Fatal("an app is active after every app was cleaned up")
	}
}
