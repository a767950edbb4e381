package e2e_test

// Login CSRF on the account page: a browser signed in as one person that
// opens a sign-in link for another is never switched without being asked.

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// Ada is signed in. Mallory asks for a link to his own address and gets Ada
// to open it. The page asks first, naming both addresses; "stay" keeps Ada
// (her session and cookie untouched, so a card she saves next is hers), and
// only "sign in as" switches. A link for Ada herself signs her in without a
// question, and a link of the old ?token= shape still works.
func TestBrowserSignInLinkNeverSwitchesSilently(t *testing.T) {
	c, _ := startBrowserCaddy(t, "")
	site := c.URL()
	br := startChromium(t, desktop)
	ada := br.newTab(t, "ada")
	ada.allowHTTPError("/api/auth/verify", 409)
	signIn(t, ada, c, "ada@example.com")
	adaSession := ada.sessionToken(site)

	// Mallory's link, asked for from elsewhere.
	mustUser(t, site, "", "POST", "/api/auth/email", map[string]any{"email": "mallory@example.com"}, 200)
	mallory := linkInLog(t, c, "mallory@example.com")
	if !strings.HasPrefix(mallory, site+"/account/sign-in#token=tok_") {
		t.Fatalf("mallory's link %q does not carry its token after #", mallory)
	}

	ada.navigate(mallory)
	ada.waitFor("the page to ask before switching", `document.querySelector('#confirm-dialog').open`)
	ada.waitText("#confirm-text", "You are signed in as ada@example.com; sign in as mallory@example.com instead?")
	ada.waitText("#confirm-ok", "Sign in as mallory@example.com")
	ada.waitText("#confirm-cancel", "Stay signed in as ada@example.com")
	ada.screenshot("switch-account-question")
	var loc string
	ada.js(`location.href`, &loc)
	if strings.Contains(loc, "token=") {
		t.Errorf("while asking, the address bar still holds the link's token: %s", loc)
	}
	ada.click("#confirm-cancel")
	ada.waitText("#who-email", "ada@example.com")
	if got := ada.sessionToken(site); got != adaSession {
		t.Errorf("staying as ada changed her session cookie")
	}
	// What ada does next (a card saved, a seat bought) is still hers.
	if who := mustUser(t, site, adaSession, "GET", "/api/auth/session", nil, 200); who.Get("user.email").String() != "ada@example.com" {
		t.Errorf("ada's session now belongs to %s", who.Get("user.email"))
	}

	// The refused link was not used up: opened again and confirmed, it switches.
	ada.navigate(mallory)
	ada.waitFor("the page to ask again", `document.querySelector('#confirm-dialog').open`)
	ada.click("#confirm-ok")
	ada.waitText("#who-email", "mallory@example.com")
	ada.screenshot("switched-after-confirm")
	if code, _ := asUser(t, site, adaSession, "GET", "/api/auth/session", nil); code != 401 {
		t.Errorf("ada's session after switching: %d, want ended (401)", code)
	}

	// Mallory's browser opens a fresh link for mallory: no question.
	mustUser(t, site, "", "POST", "/api/auth/email", map[string]any{"email": "mallory@example.com"}, 200)
	again := mallory
	eventually(t, 5*time.Second, "mallory's second link in the log", func() error {
		if again = linkInLog(t, c, "mallory@example.com"); again == mallory {
			return errors.New("not logged yet")
		}
		return nil
	})
	ada.navigate(again)
	ada.waitText("#who-email", "mallory@example.com")
	var open bool
	ada.js(`document.querySelector('#confirm-dialog').open`, &open)
	if open {
		t.Errorf("a link for the user already signed in asked to switch")
	}

	// An old-style link (token in the query), in a browser signed in as nobody.
	bob := br.newTab(t, "bob")
	mustUser(t, site, "", "POST", "/api/auth/email", map[string]any{"email": "bob@example.com"}, 200)
	_, token, _ := strings.Cut(linkInLog(t, c, "bob@example.com"), "#token=")
	bob.navigate(site + "/account/sign-in?token=" + token)
	bob.waitText("#who-email", "bob@example.com")
	bob.js(`location.href`, &loc)
	if strings.Contains(loc, "token=") {
		t.Errorf("after an old-style link the address bar still holds the token: %s", loc)
	}
}
