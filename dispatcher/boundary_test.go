// Package dispatcher_test holds the module's architectural boundary check: the dispatcher
// never calls an LLM, so no package of this module — code or tests — may depend on an LLM
// SDK, on the executor (home of the router client), on the provider-router or on the
// executor<->router wire package shared/aichat.
package dispatcher_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// forbiddenDeps are import-path prefixes the dispatcher must never depend on, with why.
var forbiddenDeps = map[string]string{
	"github.com/sashabaranov/go-openai":                   "OpenAI SDK: only the provider-router calls providers",
	"github.com/openai/openai-go":                         "OpenAI SDK: only the provider-router calls providers",
	"google.golang.org/genai":                             "Gemini SDK: only the provider-router calls providers",
	"github.com/google/generative-ai-go":                  "Gemini SDK: only the provider-router calls providers",
	"github.com/anthropics/anthropic-sdk-go":              "Anthropic SDK: only the provider-router calls providers",
	"github.com/switchyard-ai/switchyard/executor":        "the executor module holds the router client",
	"github.com/switchyard-ai/switchyard/provider-router": "the router is reached by executors only",
	"github.com/switchyard-ai/switchyard/shared/aichat":   "the executor<->router wire contract",
}

// violations returns each dependency that matches a forbidden prefix, with the reason.
func violations(deps []string) []string {
	var out []string
	for _, d := range deps {
		for prefix, why := range forbiddenDeps {
			if d == prefix || strings.HasPrefix(d, prefix+"/") {
				out = append(out, d+" ("+why+")")
			}
		}
	}
	return out
}

func TestViolationsDetectsForbiddenDeps(t *testing.T) {
	t.Parallel()
	fake := []string{
		"fmt",
		"github.com/switchyard-ai/switchyard/shared/event",
		"github.com/sashabaranov/go-openai",
		"google.golang.org/genai/internal",
		"github.com/switchyard-ai/switchyard/executor/internal/routerclient",
		"github.com/switchyard-ai/switchyard/provider-router/internal/server",
		"github.com/switchyard-ai/switchyard/shared/aichat",
		"github.com/switchyard-ai/switchyard/executorial", // a different module, not a prefix match
		"github.com/anthropics/anthropic-sdk-go/option",
	}
	got := violations(fake)
	require.Len(t, got, 6, "%v", got)
	for _, v := range got {
		require.NotContains(t, v, "executorial")
		require.NotContains(t, v, "shared/event")
	}
}

func TestDispatcherDependsOnNoLLMSDK(t *testing.T) {
	t.Parallel()
	// -test includes the test files' dependencies: tests run in the same module and a
	// dispatcher test that needs an LLM is testing the wrong service.
	out, err := exec.Command("go", "list", "-deps", "-test", "./...").CombinedOutput()
	require.NoError(t, err, "go list: %s", out)
	deps := strings.Fields(string(out))
	require.Contains(t, deps, "github.com/switchyard-ai/switchyard/dispatcher/internal/dispatch",
		"go list must have listed this module's packages")
	require.Empty(t, violations(deps), "the dispatcher must not depend on these (ARCHITECTURE.md, The split)")
}
