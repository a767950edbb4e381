package accounts_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/timeblock/timeblock/accounts"
)

// Every name people see — a user's, a key's, a management key's, a combined
// key's label — refuses control characters (C0 and C1) and text-direction
// marks, through the one check they share, and still takes ordinary text in
// any script.
func TestNamesRefuseControlAndBidiCharacters(t *testing.T) {
	forEachStore(t, func(t *testing.T, st accounts.Store) {
		e := newEnv(t, st)
		u, _ := e.user("ada@example.com", "")
		users := 0
		setters := map[string]func(name string) error{
			"user name": func(n string) error {
				users++
				_, _, err := e.svc.CreateUser(e.ctx, fmt.Sprintf("new%d@example.com", users), n)
				return err
			},
			"key name": func(n string) error { _, err := e.svc.CreateKey(e.ctx, u.ID, "", n); return err },
			"key rename": func(n string) error {
				_, err := e.svc.UpdateKey(e.ctx, u.ID, "no-such-key", &n, nil)
				return err
			},
			"management key name": func(n string) error { _, err := e.svc.CreateManagementKey(e.ctx, u.ID, n); return err },
			"combined key label": func(n string) error {
				_, err := e.svc.CreateCombinedKey(e.ctx, u.ID, []string{"a", "b"}, n, nil)
				return err
			},
			"combined key relabel": func(n string) error {
				_, err := e.svc.RelabelCombinedKey(e.ctx, u.ID, "no-such-key", n)
				return err
			},
		}
		bad := []string{
			"ci\u0085deploy",                                           // NEL, a C1 control
			"invoice\u202Egpj.exe",                                     // RLO: reads "invoice" + "exe.jpg"
			"a\x00b", "a\nb", "a\tb", "a\x1b[31mb", "a\x1fb", "a\x7fb", // C0 and DEL
			"a\u0080b", "a\u009bb", "a\u009fb", // C1
			"a\u202ab", "a\u202bb", "a\u202cb", "a\u202db", // embeddings, PDF, LRO
			"a\u2066b", "a\u2067b", "a\u2068b", "a\u2069b", // isolates
			"a\u200eb", "a\u200fb", "a\u061cb", // LRM, RLM, ALM
			"a\u2028b", "a\u2029b", // line and paragraph separators
		}
		for what, set := range setters {
			for _, name := range bad {
				err := set(name)
				var ae *accounts.Error
				if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || !strings.Contains(ae.Message, "control characters or text-direction marks") {
					t.Errorf("%s %+q: %v, want 400 naming control characters or text-direction marks", what, name, err)
				}
			}
			// Ordinary names in any script pass the check (what follows it
			// may refuse an unknown id, never with a 400).
			for _, good := range []string{"Ada’s CI", "مفتاح الإنتاج", "ключ", "東京 deploy", "a\u00a0b"} {
				var ae *accounts.Error
				if err := set(good); errors.As(err, &ae) && ae.Status == http.StatusBadRequest {
					t.Errorf("%s %q refused: %v", what, good, err)
				}
			}
		}
	})
}
