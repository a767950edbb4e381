package translate

import (
	"fmt"
	"strings"
)

// Dialect is how the reasoning control is written for the upstream.
type Dialect uint8

const (
	// DialectAuto picks by upstream format: OpenAI for chat, Thinking for messages.
	DialectAuto Dialect = iota
	// DialectOpenAI writes "reasoning_effort": low|medium|high.
	DialectOpenAI
	// DialectChatTemplateKwargs writes "chat_template_kwargs": {"enable_thinking": bool},
	// the switch of hybrid models' chat templates (Qwen3, GLM, DeepSeek V3.1 style
	// templates on vLLM, SGLang and llama.cpp).
	DialectChatTemplateKwargs
	// DialectThinking writes "thinking": {"type":"enabled","budget_tokens":n},
	// the messages-native style.
	DialectThinking
	// DialectEffortScale writes "reasoning_effort" on a model family's own
	// scale (Config.EffortScale, default low, high, max).
	DialectEffortScale
)

// ParseDialect reads a dialect name as written in the Caddyfile.
func ParseDialect(s string) (Dialect, error) {
	switch strings.ToLower(s) {
	case "", "auto":
		return DialectAuto, nil
	case "openai", "reasoning_effort":
		return DialectOpenAI, nil
	case "chat_template_kwargs", "enable_thinking":
		return DialectChatTemplateKwargs, nil
	case "thinking":
		return DialectThinking, nil
	case "effort_scale":
		return DialectEffortScale, nil
	}
	return DialectAuto, fmt.Errorf("unknown reasoning dialect %q (use openai, chat_template_kwargs, thinking or effort_scale)", s)
}

func (d Dialect) String() string {
	switch d {
	case DialectOpenAI:
		return "openai"
	case DialectChatTemplateKwargs:
		return "chat_template_kwargs"
	case DialectThinking:
		return "thinking"
	case DialectEffortScale:
		return "effort_scale"
	}
	return "auto"
}

// Defaults of Config.
const (
	DefaultMaxBodyBytes = 32 << 20
	DefaultMaxDepth     = 128
	DefaultMaxTokens    = 8192
)

// Config is one translate handler's setting. The zero value (with Upstream
// set) is ready to use; a Config is read-only once in use.
type Config struct {
	// Upstream is the format the upstream speaks.
	Upstream Format
	// Reasoning is how the reasoning control is written upstream.
	Reasoning Dialect
	// EffortScale is the ordered effort scale of DialectEffortScale, weakest
	// first (default low, high, max).
	EffortScale []string
	// ThinkPrefilled says the upstream's chat template writes the opening
	// <think> itself, so a reasoning response starts inside the reasoning and
	// only its end (</think>) shows in the output. It applies when reasoning
	// was requested and the upstream does not separate reasoning itself.
	ThinkPrefilled bool
	// OmitTopK drops top_k going to a chat upstream that rejects it.
	OmitTopK bool
	// DefaultMaxTokens is sent to a messages upstream (which requires
	// max_tokens) when a chat client gave none (default 8192).
	DefaultMaxTokens int64
	// MaxBodyBytes bounds a request body (default 32 MiB); larger is a 413.
	MaxBodyBytes int
	// MaxDepth bounds the nesting of a request body (default 128).
	MaxDepth int
}

// Dialect is the effective reasoning dialect.
func (c *Config) Dialect() Dialect {
	if c.Reasoning != DialectAuto {
		return c.Reasoning
	}
	if c.Upstream == Messages {
		return DialectThinking
	}
	return DialectOpenAI
}

func (c *Config) maxBody() int {
	if c.MaxBodyBytes > 0 {
		return c.MaxBodyBytes
	}
	return DefaultMaxBodyBytes
}

func (c *Config) maxDepth() int {
	if c.MaxDepth > 0 {
		return c.MaxDepth
	}
	return DefaultMaxDepth
}

func (c *Config) defaultMaxTokens() int64 {
	if c.DefaultMaxTokens > 0 {
		return c.DefaultMaxTokens
	}
	return DefaultMaxTokens
}

var defaultScale = []string{"low", "high", "max"}

func (c *Config) scale() []string {
	if len(c.EffortScale) > 0 {
		return c.EffortScale
	}
	return defaultScale
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	if c.Upstream != Chat && c.Upstream != Messages {
		return fmt.Errorf("upstream format must be chat or messages")
	}
	for _, s := range c.EffortScale {
		if s == "" || strings.ContainsAny(s, "\"\\") || strings.IndexFunc(s, func(r rune) bool { return r < ' ' }) >= 0 {
			return fmt.Errorf("effort scale value %q is not a plain word", s)
		}
	}
	return nil
}
