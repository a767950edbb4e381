package e2e_test

// The browser harness: headless Chromium driven with chromedp, for the tests
// of the account page (browser_test.go). One Chromium process per test
// function; each user is a tab in a browser context of its own (its own
// cookies). Every tab collects what the page writes to the console at level
// warning or error, uncaught exceptions and the browser's own log entries,
// and the test fails at the end on any that it did not expect. Stripe.js can
// be replaced by a local stand-in through the browser's request
// interception (Fetch domain), talking to a fake Stripe in the test.
//
// Chromium comes from Debian's package (apt-get install chromium). Without
// it the tests skip, unless TIMEBLOCK_REQUIRE_BROWSER=1 (CI), which makes
// that a failure. TIMEBLOCK_SCREENSHOTS=dir keeps the screenshots (default:
// the test's temporary directory); TIMEBLOCK_UPDATE_SCREENSHOT=1 lets
// TestBrowserBuyerJourney rewrite docs/account-page.png.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/tidwall/gjson"
)

// viewport is the browser window's size.
type viewport struct {
	w, h   int
	mobile bool
}

var (
	desktop = viewport{w: 1280, h: 900}
	phone   = viewport{w: 390, h: 844, mobile: true}
)

// chromiumPath finds Chromium, or skips (fails under
// TIMEBLOCK_REQUIRE_BROWSER=1) saying how to install it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("chromium")
	if err != nil {
		msg := "Chromium is not installed, so the account page's browser tests cannot run: apt-get install chromium"
		if os.Getenv("TIMEBLOCK_REQUIRE_BROWSER") == "1" {
			t.Fatal(msg + " (TIMEBLOCK_REQUIRE_BROWSER=1 makes this a failure)")
		}
		t.Skip(msg)
	}
	// Debian's /usr/bin/chromium is a shell script that adds flags of its
	// own from /etc/chromium.d (extensions, GPU rasterization); run the
	// binary it wraps, so that the browser has exactly the flags below.
	if b, err := os.ReadFile(p); err == nil && bytes.HasPrefix(b, []byte("#!")) {
		if fi, err := os.Stat("/usr/lib/chromium/chromium"); err == nil && !fi.IsDir() {
			return "/usr/lib/chromium/chromium"
		}
	}
	return p
}

// chromium is one browser process.
type chromium struct {
	t      *testing.T
	ctx    context.Context
	vp     viewport
	output *syncBuffer
}

// startChromium starts headless Chromium with a fresh profile; it ends with
// the test.
func startChromium(t *testing.T, vp viewport) *chromium {
	t.Helper()
	path := chromiumPath(t)
	out := &syncBuffer{}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(vp.w, vp.h),
		chromedp.CombinedOutput(out),
	)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
		if o := out.String(); t.Failed() && strings.TrimSpace(o) != "" {
			if len(o) > 4000 {
				o = "…" + o[len(o)-4000:]
			}
			t.Logf("Chromium's output:\n%s", o)
		}
	})
	start, cancelStart := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelStart()
	done := make(chan error, 1)
	go func() { done <- chromedp.Do(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("starting Chromium (%s): %v\n%s", path, err, out.String())
		}
	case <-start.Done():
		t.Fatalf("Chromium (%s) did not start within 30s\n%s", path, out.String())
	}
	return &chromium{t: t, ctx: ctx, vp: vp, output: out}
}

// consoleEntry is one thing the page or the browser reported.
type consoleEntry struct {
	kind   string // "console.error", "exception", "log:network" …
	text   string
	url    string
	status int // for a network log entry: the HTTP status it names
}

func (e consoleEntry) String() string {
	s := e.kind + ": " + e.text
	if e.url != "" {
		s += " (" + e.url + ")"
	}
	return s
}

// seenResponse is a response the tab received.
type seenResponse struct {
	method, url string
	status      int
}

// tab is one page in a browser context of its own.
type tab struct {
	t    *testing.T
	ctx  context.Context
	name string
	vp   viewport

	mu        sync.Mutex
	entries   []consoleEntry
	allowed   []allowedFailure
	responses []seenResponse
	methods   map[network.RequestID]string
}

// allowedFailure is an HTTP error answer a test provokes on purpose (the
// browser logs each failed request as an error).
type allowedFailure struct {
	path   string
	status int
}

var statusInLog = regexp.MustCompile(`status of (\d{3})`)

// newTab opens a tab in a new browser context (cookies of its own). The
// test fails at its end if the page wrote a warning or an error to the
// console, threw, or the browser logged one, other than the HTTP errors
// allowed with allowHTTPError.
func (c *chromium) newTab(t *testing.T, name string) *tab {
	t.Helper()
	tb := &tab{t: t, name: name, vp: c.vp, methods: map[network.RequestID]string{}}
	ctx, cancel := chromedp.NewContext(c.ctx, chromedp.WithNewBrowserContext(), chromedp.WithListener(tb.listen))
	t.Cleanup(cancel)
	tb.ctx = ctx
	// The first action on a context attaches its tab for the life of the
	// context it is given: this one, without a timeout.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("%s: opening a tab: %v", name, err)
	}
	opts := []chromedp.EmulateViewportOption{chromedp.EmulateScale(1)}
	if c.vp.mobile {
		opts = []chromedp.EmulateViewportOption{chromedp.EmulateScale(2), chromedp.EmulateMobile, chromedp.EmulateTouch, chromedp.EmulatePortrait}
	}
	tb.do(chromedp.EmulateViewport(int64(c.vp.w), int64(c.vp.h), opts...))
	t.Cleanup(tb.checkConsole)
	return tb
}

// listen runs in the tab's message loop: it only records.
func (tb *tab) listen(ev any) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		switch ev.Type {
		case runtime.ConsoleAPICalledTypeError, runtime.ConsoleAPICalledTypeWarning, runtime.ConsoleAPICalledTypeAssert:
			var parts []string
			for _, a := range ev.Args {
				parts = append(parts, remoteText(a))
			}
			e := consoleEntry{kind: "console." + string(ev.Type), text: strings.Join(parts, " ")}
			if ev.StackTrace != nil && len(ev.StackTrace.CallFrames) > 0 {
				f := ev.StackTrace.CallFrames[0]
				e.url = fmt.Sprintf("%s:%d", f.URL, f.LineNumber+1)
			}
			tb.entries = append(tb.entries, e)
		}
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		text := d.Text
		if d.Exception != nil && d.Exception.Description != "" {
			text += " " + d.Exception.Description
		}
		tb.entries = append(tb.entries, consoleEntry{kind: "uncaught exception", text: text, url: fmt.Sprintf("%s:%d", d.URL, d.LineNumber+1)})
	case *log.EventEntryAdded:
		if ev.Entry.Level != log.EntryLevelError && ev.Entry.Level != log.EntryLevelWarning {
			return
		}
		e := consoleEntry{kind: "browser log " + string(ev.Entry.Level) + " (" + string(ev.Entry.Source) + ")", text: ev.Entry.Text, url: ev.Entry.URL}
		if ev.Entry.Source == log.EntrySourceNetwork {
			if m := statusInLog.FindStringSubmatch(ev.Entry.Text); m != nil {
				e.status, _ = strconv.Atoi(m[1])
			}
		}
		tb.entries = append(tb.entries, e)
	case *network.EventRequestWillBeSent:
		tb.methods[ev.RequestID] = ev.Request.Method
	case *network.EventResponseReceived:
		tb.responses = append(tb.responses, seenResponse{method: tb.methods[ev.RequestID], url: ev.Response.URL, status: int(ev.Response.Status)})
	}
}

func remoteText(a *runtime.RemoteObject) string {
	if a == nil {
		return ""
	}
	if len(a.Value) > 0 {
		var s string
		if json.Unmarshal(a.Value, &s) == nil {
			return s
		}
		return string(a.Value)
	}
	if a.Description != "" {
		return a.Description
	}
	return string(a.Type)
}

// allowHTTPError says that an answer status to a URL containing path is
// expected (the page shows it), so the browser's "Failed to load resource"
// entry for it is no console error.
func (tb *tab) allowHTTPError(path string, status int) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.allowed = append(tb.allowed, allowedFailure{path: path, status: status})
}

// problems are the console entries no test allowed.
func (tb *tab) problems() []consoleEntry {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	var out []consoleEntry
next:
	for _, e := range tb.entries {
		if e.status != 0 {
			for _, a := range tb.allowed {
				if a.status == e.status && strings.Contains(e.url, a.path) {
					continue next
				}
			}
		}
		out = append(out, e)
	}
	return out
}

func (tb *tab) checkConsole() {
	for _, e := range tb.problems() {
		tb.t.Errorf("%s: the page's console: %s", tb.name, e)
	}
}

// responsesTo lists the responses the tab got for URLs containing path.
func (tb *tab) responsesTo(method, path string) []seenResponse {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	var out []seenResponse
	for _, r := range tb.responses {
		if r.method == method && strings.Contains(r.url, path) {
			out = append(out, r)
		}
	}
	return out
}

// ---- Actions ------------------------------------------------------------

// actionTimeout bounds one browser action; waitTimeout one wait for the page.
const (
	actionTimeout = 20 * time.Second
	waitTimeout   = 10 * time.Second
)

// do runs actions with a timeout, failing the test on an error.
func (tb *tab) do(actions ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, actionTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		tb.t.Fatalf("%s: %v\n%s", tb.name, err, tb.pageText())
	}
}

// eval evaluates a JavaScript expression (promises are awaited) into out.
func (tb *tab) eval(js string, out any) error {
	ctx, cancel := context.WithTimeout(tb.ctx, actionTimeout)
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](js, chromedp.EvalAwaitPromise))
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	if len(raw) == 0 {
		raw = []byte("null")
	}
	return json.Unmarshal(raw, out)
}

// js evaluates an expression, failing the test on an error.
func (tb *tab) js(js string, out any) {
	tb.t.Helper()
	if err := tb.eval(js, out); err != nil {
		tb.t.Fatalf("%s: evaluating %s: %v", tb.name, js, err)
	}
}

// jsq quotes s as a JavaScript string.
func jsq(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// navigate opens a URL and waits for the load.
func (tb *tab) navigate(u string) {
	tb.t.Helper()
	tb.do(chromedp.Navigate(u))
}

// pageText is the visible text of the page, for failure messages.
func (tb *tab) pageText() string {
	var s string
	if err := tb.eval(`document.body ? document.body.innerText : ""`, &s); err != nil {
		return "(page text unavailable: " + err.Error() + ")"
	}
	if len(s) > 3000 {
		s = s[:3000] + "…"
	}
	return "--- page " + tb.name + " ---\n" + s
}

// waitFor polls a JavaScript condition until it is true.
func (tb *tab) waitFor(what, cond string) {
	tb.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	var last error
	for {
		var ok bool
		if last = tb.eval(`!!(`+cond+`)`, &ok); last == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			shot := tb.failureShot()
			tb.t.Fatalf("%s: waited %v for %s (%s): last error %v%s\n%s", tb.name, waitTimeout, what, cond, last, shot, tb.pageText())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// visible is a JavaScript condition: the element exists and is displayed.
func visible(sel string) string {
	return `(() => { const e = document.querySelector(` + jsq(sel) + `); return !!e && !e.closest('[hidden]') && e.getClientRects().length > 0; })()`
}

// text waits for sel to be visible and returns its visible text.
func (tb *tab) text(sel string) string {
	tb.t.Helper()
	tb.waitFor(sel+" to show", visible(sel))
	var s string
	tb.js(`document.querySelector(`+jsq(sel)+`).innerText`, &s)
	return s
}

// waitText waits until sel's visible text contains want.
func (tb *tab) waitText(sel, want string) {
	tb.t.Helper()
	tb.waitFor(fmt.Sprintf("%s to say %q", sel, want),
		visible(sel)+` && document.querySelector(`+jsq(sel)+`).innerText.includes(`+jsq(want)+`)`)
}

// click clicks the element with the mouse, once it is visible.
func (tb *tab) click(sel string) {
	tb.t.Helper()
	tb.waitFor(sel+" to show", visible(sel)+` && !document.querySelector(`+jsq(sel)+`).disabled`)
	tb.do(chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible))
}

var clickSeq atomic.Int64

// clickText clicks the visible button or link inside scope whose text is
// label.
func (tb *tab) clickText(scope, label string) {
	tb.t.Helper()
	mark := strconv.FormatInt(clickSeq.Add(1), 10)
	find := `(() => {
		for (const root of document.querySelectorAll(` + jsq(scope) + `)) {
			if (root.closest('[hidden]')) continue;
			for (const e of root.querySelectorAll('button, a')) {
				if (e.textContent.trim() === ` + jsq(label) + ` && e.getClientRects().length > 0 && !e.disabled && !e.closest('[hidden]')) {
					e.setAttribute('data-tb-click', ` + jsq(mark) + `);
					return true;
				}
			}
		}
		return false;
	})()`
	tb.waitFor(fmt.Sprintf("a %q button in %s", label, scope), find)
	tb.do(chromedp.Click(chromedp.CSS(`[data-tb-click="`+mark+`"]`), chromedp.NodeVisible))
}

// typeInto types text into an input with the keyboard, after clearing it.
func (tb *tab) typeInto(sel, text string) {
	tb.t.Helper()
	tb.waitFor(sel+" to show", visible(sel))
	tb.js(`(() => { const e = document.querySelector(`+jsq(sel)+`); e.value = ''; e.focus(); })()`, nil)
	tb.do(chromedp.SendKeys(chromedp.CSS(sel), text, chromedp.NodeVisible))
}

// choose selects an option of a <select> as a user would (input and
// change events).
func (tb *tab) choose(sel, value string) {
	tb.t.Helper()
	tb.waitFor(fmt.Sprintf("%s to offer %q", sel, value),
		visible(sel)+` && [...document.querySelector(`+jsq(sel)+`).options].some(o => o.value === `+jsq(value)+`)`)
	tb.js(`(() => { const e = document.querySelector(`+jsq(sel)+`); e.value = `+jsq(value)+`;
		e.dispatchEvent(new Event('input', {bubbles: true})); e.dispatchEvent(new Event('change', {bubbles: true})); })()`, nil)
}

// count returns how many elements match sel.
func (tb *tab) count(sel string) int {
	tb.t.Helper()
	var n int
	tb.js(`document.querySelectorAll(`+jsq(sel)+`).length`, &n)
	return n
}

// route opens a route of the page (the part after #).
func (tb *tab) route(hash string) {
	tb.t.Helper()
	tb.js(`location.hash = `+jsq(hash), nil)
}

// cookies returns the browser's cookies for a URL (network.GetCookies).
func (tb *tab) cookies(u string) []*network.Cookie {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, actionTimeout)
	defer cancel()
	res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{u}})
	if err != nil {
		tb.t.Fatalf("%s: Network.getCookies: %v", tb.name, err)
	}
	return res.Cookies
}

// sessionToken is the tb_session cookie's value for the site (empty when
// there is none).
func (tb *tab) sessionToken(site string) string {
	tb.t.Helper()
	for _, c := range tb.cookies(site + "/") {
		if c.Name == "tb_session" {
			return c.Value
		}
	}
	return ""
}

// ---- Screenshots ---------------------------------------------------------

var screenshotDirs sync.Map // test name → dir

// screenshotDir is TIMEBLOCK_SCREENSHOTS when set, else a temporary
// directory of the test.
func screenshotDir(t *testing.T) string {
	if d := os.Getenv("TIMEBLOCK_SCREENSHOTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d, ok := screenshotDirs.Load(t.Name()); ok {
		return d.(string)
	}
	d := t.TempDir()
	screenshotDirs.Store(t.Name(), d)
	t.Cleanup(func() { screenshotDirs.Delete(t.Name()) })
	return d
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// screenshot writes the viewport as <dir>/<test>-<name>.png and returns the
// path and the image.
func (tb *tab) screenshot(name string) (string, []byte) {
	tb.t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, actionTimeout)
	defer cancel()
	buf, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		tb.t.Fatalf("%s: screenshot %s: %v", tb.name, name, err)
	}
	if !bytes.HasPrefix(buf, []byte("\x89PNG\r\n\x1a\n")) {
		tb.t.Fatalf("%s: screenshot %s is not a PNG", tb.name, name)
	}
	path := filepath.Join(screenshotDir(tb.t), unsafeName.ReplaceAllString(tb.t.Name()+"-"+name, "_")+".png")
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		tb.t.Fatal(err)
	}
	tb.t.Logf("screenshot: %s", path)
	return path, buf
}

// failureShot saves a screenshot when TIMEBLOCK_SCREENSHOTS is set, for a
// failure message.
func (tb *tab) failureShot() string {
	d := os.Getenv("TIMEBLOCK_SCREENSHOTS")
	if d == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(tb.ctx, 5*time.Second)
	defer cancel()
	buf, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		return ""
	}
	path := filepath.Join(d, unsafeName.ReplaceAllString(tb.t.Name()+"-"+tb.name+"-failure", "_")+".png")
	if os.WriteFile(path, buf, 0o644) != nil {
		return ""
	}
	return "\nscreenshot: " + path
}

// ---- Stripe.js stand-in ----------------------------------------------------

// stripeJS is the stand-in for https://js.stripe.com/v3/: the part of
// Stripe.js the page uses. Stripe(pk).elements().create('card') mounts a card
// number field; createPaymentMethod, confirmCardSetup and confirmCardPayment
// call https://api.stripe.com with the publishable key (form-encoded, as
// Stripe.js does: no preflight), which the test's fake Stripe answers
// through the same interception. 3-D Secure shows a test bank's box in the
// page with "Complete authentication" and "Fail authentication".
const stripeJS = `(function () {
  'use strict';
  var API = 'https://api.stripe.com/v1/';
  async function post(key, path, params) {
    var body = new URLSearchParams(params);
    body.set('key', key);
    var res = await fetch(API + path, { method: 'POST', body: body });
    var json = await res.json();
    return { ok: res.ok, json: json };
  }
  function idOf(secret) { return secret.slice(0, secret.indexOf('_secret_')); }
  function challenge(what) {
    return new Promise(function (resolve) {
      var box = document.createElement('div');
      box.id = 'stripe-standin-3ds';
      box.setAttribute('role', 'dialog');
      box.setAttribute('aria-label', '3-D Secure');
      Object.assign(box.style, { position: 'fixed', top: '20%', left: '10%', right: '10%', padding: '16px',
        background: '#fff', color: '#000', border: '2px solid #635bff', zIndex: '2147483647' });
      var p = document.createElement('p');
      p.textContent = 'Test bank: confirm the ' + what + '.';
      var ok = document.createElement('button');
      ok.type = 'button'; ok.id = 'stripe-standin-3ds-complete'; ok.textContent = 'Complete authentication';
      var no = document.createElement('button');
      no.type = 'button'; no.id = 'stripe-standin-3ds-fail'; no.textContent = 'Fail authentication';
      ok.addEventListener('click', function () { box.remove(); resolve(true); });
      no.addEventListener('click', function () { box.remove(); resolve(false); });
      box.append(p, ok, no);
      document.body.append(box);
    });
  }
  window.Stripe = function (pk) {
    if (!/^pk_(test|live)_/.test(pk)) throw new Error('Stripe: not a publishable key');
    window.__stripeStandIn = { publishableKey: pk };
    return {
      elements: function () {
        return {
          create: function (type) {
            if (type !== 'card') throw new Error('Stripe stand-in: only the card element');
            var input = document.createElement('input');
            input.id = 'stripe-standin-card';
            input.setAttribute('aria-label', 'Card number');
            input.autocomplete = 'cc-number';
            input.inputMode = 'numeric';
            var handlers = {};
            input.addEventListener('input', function () {
              (handlers.change || []).forEach(function (h) { h({ elementType: 'card', empty: !input.value, complete: input.value.replace(/\D/g, '').length >= 16 }); });
            });
            return {
              mount: function (target) { (typeof target === 'string' ? document.querySelector(target) : target).append(input); },
              on: function (ev, h) { (handlers[ev] = handlers[ev] || []).push(h); },
              destroy: function () { input.remove(); },
              __number: function () { return input.value.replace(/\D/g, ''); },
            };
          },
        };
      },
      createPaymentMethod: async function (opts) {
        if (!opts || opts.type !== 'card' || !opts.card || !opts.card.__number) throw new Error('Stripe stand-in: createPaymentMethod({type: "card", card: element})');
        var number = opts.card.__number();
        if (number.length < 16) return { error: { type: 'validation_error', code: 'incomplete_number', message: 'Your card number is incomplete.' } };
        var r = await post(pk, 'payment_methods', { type: 'card', 'card[number]': number });
        return r.ok ? { paymentMethod: r.json } : { error: r.json.error };
      },
      confirmCardSetup: async function (secret) {
        var passed = await challenge('saving of this card');
        var r = await post(pk, 'setup_intents/' + idOf(secret) + '/confirm', { client_secret: secret, authentication: passed ? 'passed' : 'failed' });
        if (!r.ok) return { error: r.json.error };
        if (r.json.status !== 'succeeded') return { error: { type: 'card_error', code: 'setup_intent_authentication_failure', message: 'We are unable to authenticate your payment method. Please choose a different payment method and try again.' }, setupIntent: r.json };
        return { setupIntent: r.json };
      },
      confirmCardPayment: async function (secret) {
        var passed = await challenge('payment');
        var r = await post(pk, 'payment_intents/' + idOf(secret) + '/confirm', { client_secret: secret, authentication: passed ? 'passed' : 'failed' });
        if (!r.ok) return { error: r.json.error };
        if (r.json.status !== 'succeeded') return { error: { type: 'card_error', code: 'payment_intent_authentication_failure', message: 'We are unable to authenticate your payment method. Please choose a different payment method and try again.' }, paymentIntent: r.json };
        return { paymentIntent: r.json };
      },
    };
  };
})();
`

// interceptStripe serves https://js.stripe.com/* with the stand-in and
// answers https://api.stripe.com/* with api (the fake Stripe), through the
// Fetch domain; the browser sends nothing to Stripe. It returns how many
// times each was asked.
func (tb *tab) interceptStripe(api http.Handler) (scriptLoads, apiCalls *atomic.Int64) {
	tb.t.Helper()
	scriptLoads, apiCalls = new(atomic.Int64), new(atomic.Int64)
	paused := chromedp.Events(tb.ctx, fetch.RequestPaused)
	go func() {
		for ev, err := range paused {
			if err != nil {
				return
			}
			go tb.answerPaused(ev, api, scriptLoads, apiCalls)
		}
	}()
	ctx, cancel := context.WithTimeout(tb.ctx, actionTimeout)
	defer cancel()
	if _, err := chromedp.Call(ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{
		{URLPattern: "https://js.stripe.com/*"},
		{URLPattern: "https://api.stripe.com/*"},
	}}); err != nil {
		tb.t.Fatalf("%s: Fetch.enable: %v", tb.name, err)
	}
	return scriptLoads, apiCalls
}

func (tb *tab) answerPaused(ev fetch.EventRequestPaused, api http.Handler, scriptLoads, apiCalls *atomic.Int64) {
	u, _ := url.Parse(ev.Request.URL)
	status, ctype, body := 404, "text/plain", []byte("not found")
	headers := []*fetch.HeaderEntry{}
	switch {
	case u != nil && u.Host == "js.stripe.com":
		scriptLoads.Add(1)
		status, ctype, body = 200, "application/javascript; charset=utf-8", []byte(stripeJS)
	case u != nil && u.Host == "api.stripe.com":
		apiCalls.Add(1)
		var rd io.Reader
		var post bytes.Buffer
		for _, e := range ev.Request.PostDataEntries {
			post.Write(e.Bytes)
		}
		rd = &post
		req := httptest.NewRequest(ev.Request.Method, ev.Request.URL, rd)
		for k, v := range ev.Request.Headers {
			if s, ok := v.(string); ok {
				req.Header.Set(k, s)
			}
		}
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, req)
		status, ctype, body = rec.Code, rec.Header().Get("Content-Type"), rec.Body.Bytes()
		headers = append(headers, &fetch.HeaderEntry{Name: "Access-Control-Allow-Origin", Value: "*"})
	}
	headers = append(headers, &fetch.HeaderEntry{Name: "Content-Type", Value: ctype})
	ctx, cancel := context.WithTimeout(tb.ctx, actionTimeout)
	defer cancel()
	if _, err := chromedp.Call(ctx, fetch.FulfillRequest, fetch.FulfillRequestParams{
		RequestID: ev.RequestID, ResponseCode: int64(status), ResponseHeaders: headers, Body: body,
	}); err != nil && tb.ctx.Err() == nil {
		// Reported with the console entries at the test's end (this
		// goroutine may outlive the test).
		tb.mu.Lock()
		tb.entries = append(tb.entries, consoleEntry{kind: "request interception", text: err.Error(), url: ev.Request.URL})
		tb.mu.Unlock()
	}
}

// ---- HTTP as a script would send it, from Go ---------------------------------

// asUser calls the account API with a session token (the cookie's value) as
// a script would, and returns the status and the envelope.
func asUser(t *testing.T, base, token, method, path string, body any) (int, gjson.Result) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, gjson.ParseBytes(b)
}

// mustUser is asUser that fails the test unless the status is want.
func mustUser(t *testing.T, base, token, method, path string, body any, want int) gjson.Result {
	t.Helper()
	code, env := asUser(t, base, token, method, path, body)
	if code != want {
		t.Fatalf("%s %s: %d, want %d\n%s", method, path, code, want, env.Raw)
	}
	return env.Get("data")
}

// syncBuffer is a bytes.Buffer safe for one writer and readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
