//go:build linux || darwin

package e2e_test

// Gemini CLI end to end, as TestClaudeCode and TestCodex run theirs: the
// pinned CLI in headless mode (-p) with base URL <site>/gemini and a key
// bought through the account API, through timeblock_gate and
// timeblock_translate to the simulator, once speaking chat completions and
// once messages. The run streams (:streamGenerateContent?alt=sse), asks for
// thoughts (the CLI always sends thinkingConfig.includeThoughts) and makes a
// read_file round trip.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// geminiCLISettings is the CLI's user settings for a run.
//   - security.auth.selectedType: with GOOGLE_GEMINI_BASE_URL set and no
//     selected type, Gemini CLI 0.61.0 derives the auth type "gateway" from
//     the environment, which its headless start rejects ("Invalid auth
//     method selected.", exit 41). "gemini-api-key" is what its auth dialog
//     writes for a key; the base URL still comes from GOOGLE_GEMINI_BASE_URL.
//   - folderTrust off: a headless run in an untrusted directory exits 55.
//   - no update checks, usage statistics or telemetry: the run stays on
//     loopback, and requests carry no installation id
//     (x-gemini-api-privileged-user-id).
//   - loop detection off: its model check asks gemini-3-flash-preview, a
//     model the key does not hold.
//
// The retry settings (general.maxAttempts) stay at the CLI's default.
const geminiCLISettings = `{
	"security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": false}},
	"general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
	"privacy": {"usageStatisticsEnabled": false},
	"telemetry": {"enabled": false},
	"model": {"disableLoopDetection": true}
}
`

func TestGeminiCLI(t *testing.T) {
	bin := clientBin(t, "gemini", "@google/gemini-cli")
	for _, upstream := range []string{"chat", "messages"} {
		t.Run(upstream+" upstream", func(t *testing.T) {
			f := startClients(t, upstream)
			work, marker, notes := clientWorkDir(t)
			env, geminiHome, reports := geminiEnv(t, f, f.key)
			args, _ := json.Marshal(map[string]string{"file_path": notes})
			r := f.run(t, bin, work, env,
				// read_file is read-only: headless runs allow it without
				// --yolo or an approval mode.
				"-p", "Read my notes: call tool read_file with "+string(args),
				// Without -m the CLI routes "auto" through a classifier on
				// gemini-3.5-flash-lite first.
				"--model", clientsModel,
				"--output-format", "stream-json",
			)
			defer logGeminiReports(t, reports)
			defer r.logOnFailure(t)
			checkGeminiRun(t, r, notes, marker)
			checkGeminiTranscript(t, geminiHome, marker)
			// The model's slash stays a slash in the path: the CLI does not
			// escape it.
			r.checkGate(t, "/gemini/v1beta/models/"+clientsModel+":streamGenerateContent", "X-Goog-Api-Key")
			// Caddy redacts Authorization by itself, not x-goog-api-key: the
			// log filter does.
			if strings.Contains(f.c.Logs(), f.key) {
				t.Errorf("the key is in Caddy's log")
			}
		})
	}
}

// geminiEnv is Gemini CLI's environment for key, with retries at its
// default: the base URL and the key, a GEMINI_CLI_HOME with the run's
// settings (returned as home), no machine-wide settings, and the directory
// the CLI writes its error reports to (reports).
func geminiEnv(t *testing.T, f *clientsFixture, key string) (env []string, home, reports string) {
	t.Helper()
	home = geminiCLIHome(t)
	// Where the CLI writes its error reports (os.tmpdir()), kept out of the
	// machine's /tmp and shown when the test fails.
	reports = t.TempDir()
	return []string{
		"GOOGLE_GEMINI_BASE_URL=" + f.c.URL() + "/gemini",
		"GEMINI_API_KEY=" + key,
		"GEMINI_CLI_HOME=" + home,
		// No machine-wide settings (/etc/gemini-cli) either.
		"GEMINI_CLI_SYSTEM_SETTINGS_PATH=" + filepath.Join(home, "system-settings.json"),
		"GEMINI_CLI_SYSTEM_DEFAULTS_PATH=" + filepath.Join(home, "system-defaults.json"),
		// One node process, not a relaunched child.
		"GEMINI_CLI_NO_RELAUNCH=true",
		"TMPDIR=" + reports,
	}, home, reports
}

// geminiCLIHome makes the directory the CLI keeps its .gemini in
// (GEMINI_CLI_HOME), with the run's settings.
func geminiCLIHome(t *testing.T) string {
	t.Helper()
	home := filepath.Join(t.TempDir(), "gemini")
	if err := os.MkdirAll(filepath.Join(home, ".gemini"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".gemini", "settings.json"), []byte(geminiCLISettings), 0o600); err != nil {
		t.Fatal(err)
	}
	return home
}

// checkGeminiRun checks the CLI's stream-json events: the read_file call the
// prompt asked for and its success, and the final answer, the simulator's
// echo of the file's content.
func checkGeminiRun(t *testing.T, r *clientRun, notes, marker string) {
	t.Helper()
	if r.err != nil {
		t.Errorf("gemini exited with %v", r.err)
	}
	var toolUse, toolResult, result gjson.Result
	// The assistant's text after the last tool result, sent as deltas.
	var answer strings.Builder
	for _, ev := range r.events {
		switch ev.Get("type").Str {
		case "tool_use":
			toolUse = ev
		case "tool_result":
			toolResult = ev
			answer.Reset()
		case "message":
			if ev.Get("role").Str == "assistant" {
				answer.WriteString(ev.Get("content").Str)
			}
		case "result":
			result = ev
		case "error":
			t.Errorf("gemini reported %s", ev.Raw)
		}
	}
	if toolUse.Get("tool_name").Str != "read_file" || toolUse.Get("parameters.file_path").Str != notes {
		t.Errorf("no read_file call on %s; the last tool call: %s", notes, toolUse.Raw)
	}
	// The event's output is the tool's display text, empty for read_file;
	// the content sent back is checked in the transcript.
	if toolResult.Get("status").Str != "success" || toolResult.Get("tool_id").Str != toolUse.Get("tool_id").Str {
		t.Errorf("the read_file call did not succeed: %s", toolResult.Raw)
	}
	if text := answer.String(); !strings.HasPrefix(text, "Simulated reply ") || !strings.Contains(text, marker) {
		t.Errorf("the final answer is not the simulator's echoing %q: %q", marker, text)
	}
	if result.Get("status").Str != "success" {
		t.Errorf("the run's result is not a success: %s", result.Raw)
	}
}

// checkGeminiTranscript checks the session transcript the CLI keeps in
// .gemini/tmp/<project>/chats: headless output never prints thoughts, the
// transcript records them with each model turn, and it records what
// read_file sent back.
func checkGeminiTranscript(t *testing.T, geminiHome, marker string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(geminiHome, ".gemini", "tmp", "*", "chats", "session-*.jsonl"))
	if err != nil || len(files) != 1 {
		t.Errorf("want one session transcript, found %v (%v)", files, err)
		return
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var thought, toolResponse gjson.Result
	for _, line := range strings.Split(string(b), "\n") {
		// Lines are records, or updates of the session ({"$set": ...}); a
		// model turn is recorded again as it grows.
		rec := gjson.Parse(line)
		if rec.Get("type").Str != "gemini" {
			continue
		}
		rec.Get("thoughts").ForEach(func(_, th gjson.Result) bool {
			if th.Get("description").Str != "" {
				thought = rec
			}
			return true
		})
		rec.Get("toolCalls").ForEach(func(_, call gjson.Result) bool {
			if call.Get("name").Str == "read_file" {
				toolResponse = call.Get("result.0.functionResponse")
			}
			return true
		})
	}
	if !thought.Exists() {
		t.Errorf("no model turn with a thought in the transcript (the CLI asks for thoughts)")
	} else {
		t.Logf("thoughts: %s, tokens: %s", thought.Get("thoughts").Raw, thought.Get("tokens").Raw)
	}
	if !strings.Contains(toolResponse.Get("response.output").Str, marker) {
		t.Errorf("the read_file response sent back does not hold the file's content %q: %s", marker, toolResponse.Raw)
	}
}

// logGeminiReports puts the error reports the CLI wrote (the failed request
// and its error) in the test log if the test failed.
func logGeminiReports(t *testing.T, dir string) {
	if !t.Failed() {
		return
	}
	files, _ := filepath.Glob(filepath.Join(dir, "gemini-client-error-*.json"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		// The report holds the whole request, its 30 KB system prompt
		// included; the error comes first.
		const most = 8 << 10
		if len(b) > most {
			b = append(b[:most], "…"...)
		}
		t.Logf("%s:\n%s", filepath.Base(name), b)
	}
}
