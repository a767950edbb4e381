//go:build linux || darwin

package e2e_test

// The Gemini API end to end, with Google's Go SDK (google.golang.org/genai)
// as a user would hold it: base URL <site>/gemini, a consumption key bought
// through the account API, through timeblock_gate and timeblock_translate
// to the simulator, once speaking chat completions and once messages.

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"google.golang.org/genai"
)

func geminiClient(t *testing.T, baseURL, key string) *genai.Client {
	t.Helper()
	c, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		APIKey:      key,
		Backend:     genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: baseURL + "/gemini/"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestGeminiSDK(t *testing.T) {
	for _, upstream := range []string{"chat", "messages"} {
		t.Run(upstream+" upstream", func(t *testing.T) {
			f := startClients(t, upstream) // the routes and log filter of Caddyfile.example
			geminiSDKCases(t, f)
		})
	}
}

func geminiSDKCases(t *testing.T, f *clientsFixture) {
	ctx := context.Background()
	c := geminiClient(t, f.c.URL(), f.key)
	models := c.Models

	t.Run("text", func(t *testing.T) {
		cfg := &genai.GenerateContentConfig{
			SystemInstruction: genai.NewContentFromText("be brief", genai.RoleUser),
			MaxOutputTokens:   200,
		}
		prompt := genai.Text("hello over the Gemini API")
		resp, err := models.GenerateContent(ctx, clientsModel, prompt, cfg)
		if err != nil {
			t.Fatal(err)
		}
		text := resp.Text()
		if !strings.Contains(text, "hello over the Gemini API") {
			t.Errorf("the answer does not echo the prompt: %q", text)
		}
		cand := resp.Candidates[0]
		if cand.FinishReason != genai.FinishReasonStop || cand.Content.Role != genai.RoleModel {
			t.Errorf("finish %q role %q", cand.FinishReason, cand.Content.Role)
		}
		u := resp.UsageMetadata
		if u == nil || u.PromptTokenCount == 0 || u.CandidatesTokenCount == 0 ||
			u.TotalTokenCount != u.PromptTokenCount+u.CandidatesTokenCount+u.ThoughtsTokenCount {
			t.Errorf("usage %+v", u)
		}

		// The stream tells the same answer.
		var streamed strings.Builder
		var last *genai.GenerateContentResponse
		for chunk, err := range models.GenerateContentStream(ctx, clientsModel, prompt, cfg) {
			if err != nil {
				t.Fatal(err)
			}
			streamed.WriteString(chunk.Text())
			last = chunk
		}
		if streamed.String() != text {
			t.Errorf("streamed %q, unstreamed %q", streamed.String(), text)
		}
		if last == nil || len(last.Candidates) == 0 || last.Candidates[0].FinishReason != genai.FinishReasonStop ||
			last.UsageMetadata == nil || last.UsageMetadata.CandidatesTokenCount != u.CandidatesTokenCount {
			t.Errorf("the stream's last event: %+v", last)
		}
	})

	t.Run("thinking", func(t *testing.T) {
		cfg := &genai.GenerateContentConfig{ThinkingConfig: &genai.ThinkingConfig{IncludeThoughts: true}}
		check := func(name string, parts []*genai.Part) {
			t.Helper()
			var thought, answer string
			for _, p := range parts {
				if p.Thought {
					thought += p.Text
				} else {
					answer += p.Text
				}
			}
			if thought == "" || answer == "" {
				t.Errorf("%s: thought %q answer %q", name, thought, answer)
			}
		}
		resp, err := models.GenerateContent(ctx, clientsModel, genai.Text("think first"), cfg)
		if err != nil {
			t.Fatal(err)
		}
		check("whole", resp.Candidates[0].Content.Parts)
		if resp.UsageMetadata.ThoughtsTokenCount == 0 {
			t.Errorf("no thought tokens counted: %+v", resp.UsageMetadata)
		}
		var parts []*genai.Part
		for chunk, err := range models.GenerateContentStream(ctx, clientsModel, genai.Text("think first"), cfg) {
			if err != nil {
				t.Fatal(err)
			}
			if len(chunk.Candidates) > 0 && chunk.Candidates[0].Content != nil {
				parts = append(parts, chunk.Candidates[0].Content.Parts...)
			}
		}
		check("streamed", parts)
	})

	t.Run("function call round trip", func(t *testing.T) {
		tools := []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{{
			Name:        "get_weather",
			Description: "the weather in a city",
			Parameters: &genai.Schema{
				Type:       genai.TypeObject,
				Properties: map[string]*genai.Schema{"city": {Type: genai.TypeString}},
				Required:   []string{"city"},
			},
		}}}}
		cfg := &genai.GenerateContentConfig{Tools: tools}
		history := genai.Text(`call tool get_weather with {"city":"Paris"}`)
		for _, stream := range []bool{false, true} {
			var calls []*genai.FunctionCall
			var modelTurn *genai.Content
			if stream {
				modelTurn = &genai.Content{Role: genai.RoleModel}
				for chunk, err := range models.GenerateContentStream(ctx, clientsModel, history, cfg) {
					if err != nil {
						t.Fatal(err)
					}
					calls = append(calls, chunk.FunctionCalls()...)
					if len(chunk.Candidates) > 0 && chunk.Candidates[0].Content != nil {
						modelTurn.Parts = append(modelTurn.Parts, chunk.Candidates[0].Content.Parts...)
					}
				}
			} else {
				resp, err := models.GenerateContent(ctx, clientsModel, history, cfg)
				if err != nil {
					t.Fatal(err)
				}
				calls, modelTurn = resp.FunctionCalls(), resp.Candidates[0].Content
			}
			if len(calls) != 1 || calls[0].Name != "get_weather" || calls[0].Args["city"] != "Paris" {
				t.Fatalf("stream %v: calls %+v", stream, calls)
			}
			// The function's answer goes back; the model's next turn echoes it.
			turns := append(append([]*genai.Content{}, history...), modelTurn,
				genai.NewContentFromFunctionResponse("get_weather", map[string]any{"forecast": "sunny-17C"}, genai.RoleUser))
			turns[len(turns)-1].Parts[0].FunctionResponse.ID = calls[0].ID
			resp, err := models.GenerateContent(ctx, clientsModel, turns, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.FunctionCalls()) != 0 || !strings.Contains(resp.Text(), "sunny-17C") {
				t.Errorf("stream %v: after the result, %q (calls %v)", stream, resp.Text(), resp.FunctionCalls())
			}
		}
	})

	t.Run("count tokens", func(t *testing.T) {
		short, err := models.CountTokens(ctx, clientsModel, genai.Text("hi"), nil)
		if err != nil {
			t.Fatal(err)
		}
		long, err := models.CountTokens(ctx, clientsModel, genai.Text(strings.Repeat("a longer prompt ", 50)), nil)
		if err != nil {
			t.Fatal(err)
		}
		if short.TotalTokens <= 0 || long.TotalTokens <= short.TotalTokens {
			t.Errorf("counts %d and %d", short.TotalTokens, long.TotalTokens)
		}
	})

	t.Run("models", func(t *testing.T) {
		var names []string
		for m, err := range models.All(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, m.Name)
		}
		if len(names) != 1 || names[0] != "models/"+clientsModel {
			t.Errorf("listed %v", names)
		}
		m, err := models.Get(ctx, clientsModel, nil)
		if err != nil || m.Name != "models/"+clientsModel {
			t.Errorf("get: %+v %v", m, err)
		}
	})

	t.Run("errors", func(t *testing.T) {
		var apiErr genai.APIError
		_, err := geminiClient(t, f.c.URL(), "sk_pool_not-a-real-key-0000000000000000").Models.
			GenerateContent(ctx, clientsModel, genai.Text("hi"), nil)
		if !errors.As(err, &apiErr) || apiErr.Code != http.StatusUnauthorized || apiErr.Status != "UNAUTHENTICATED" {
			t.Errorf("a wrong key: %v", err)
		}
		_, err = models.GenerateContent(ctx, "gemini-2.5-pro", genai.Text("hi"), nil)
		if !errors.As(err, &apiErr) || apiErr.Code != http.StatusNotFound || !strings.Contains(apiErr.Message, clientsModel) {
			t.Errorf("a model the key does not hold: %v", err)
		}
		_, err = models.GenerateContent(ctx, clientsModel, genai.Text("hi"), &genai.GenerateContentConfig{
			Tools: []*genai.Tool{{GoogleSearch: &genai.GoogleSearch{}}},
		})
		if !errors.As(err, &apiErr) || apiErr.Code != http.StatusBadRequest || apiErr.Status != "INVALID_ARGUMENT" {
			t.Errorf("a server-side tool: %v", err)
		}
	})

	// The key in the query, as curl users of the Gemini API send it.
	t.Run("key in the query", func(t *testing.T) {
		body := `{"contents":[{"role":"user","parts":[{"text":"by query"}]}]}`
		resp, err := http.Post(f.c.URL()+"/gemini/v1beta/models/"+clientsModel+":generateContent?key="+f.key,
			"application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(gjson.GetBytes(b, "candidates.0.content.parts.0.text").Str, "by query") {
			t.Errorf("%d %s", resp.StatusCode, b)
		}
		// The access line is written as the handler returns, which may be
		// after the client has the answer.
		logged := false
		for i := 0; i < 50 && !logged; i++ {
			logged = strings.Contains(f.c.Logs(), ":generateContent?key=REDACTED")
			if !logged {
				time.Sleep(100 * time.Millisecond)
			}
		}
		if !logged || strings.Contains(f.c.Logs(), f.key) {
			t.Error("the access log does not hide the key")
		}
	})
}
