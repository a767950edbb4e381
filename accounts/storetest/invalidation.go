package storetest

import (
	"testing"

	"github.com/timeblock/timeblock/accounts"
)

func testInvalidation(t *testing.T, s accounts.Store) {
	// Callbacks must not block, so they hand over without waiting.
	listen := func() (chan string, func(string)) {
		ch := make(chan string, 64)
		return ch, func(userID string) {
			select {
			case ch <- userID:
			default:
			}
		}
	}
	first, firstFn := listen()
	second, secondFn := listen()
	cancelFirst := s.OnInvalidation(firstFn)
	cancelSecond := s.OnInvalidation(secondFn)
	defer cancelSecond()

	publish := func(userID string) {
		t.Helper()
		if err := s.PublishInvalidation(t.Context(), userID); err != nil {
			t.Fatalf("PublishInvalidation(%q): %v", userID, err)
		}
	}
	publish("user-a")
	waitFor(t, first, "user-a")
	waitFor(t, second, "user-a")

	cancelFirst()
	cancelFirst() // a second cancel is harmless
	publish("user-b")
	publish("user-c")
	// Invalidations are delivered in order, so once the second callback has
	// seen user-c, the first would have seen user-b had it still been registered.
	waitFor(t, second, "user-b")
	waitFor(t, second, "user-c")
	for len(first) > 0 {
		if got := <-first; got == "user-b" || got == "user-c" {
			t.Errorf("canceled callback received %q", got)
		}
	}
}
