package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestExecutorCallsRouterOverMTLS runs the real binaries with the router serving mutual
// TLS from `provider-router certs`: a job completes (the executor presented its client
// certificate), and a caller without one is refused by the mtls lock even with the right
// service key.
func TestExecutorCallsRouterOverMTLS(t *testing.T) {
	t.Parallel()
	s := startStack(t, StackOptions{RouterTLS: true})

	code, res := s.Do(http.MethodPost, "/api/v1/dispatch", map[string]any{
		"job_type": "demo_llm",
		"payload":  map[string]any{"messages": []map[string]string{{"role": "user", "content": "Hello over mTLS"}}},
	})
	require.Equal(t, http.StatusAccepted, code, "%v", res)
	r := s.WaitStatus(res["jobId"].(string), 30*time.Second, "completed", "failed", "timed_out", "cancelled")
	require.Equal(t, "completed", r["status"], "%v", r)
	require.Equal(t, "sim-llm", r["output"].(map[string]any)["provider"])

	// Without a client certificate: 403 naming the mtls lock.
	ca, err := os.ReadFile(filepath.Join(s.RouterTLSDir, "ca.pem"))
	require.NoError(t, err)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	key := []byte(s.H.ServiceKey)
	req, err := http.NewRequest(http.MethodPost, "https://"+s.RouterAddr+"/internal/ai/chat",
		strings.NewReader(`{"messages":[{"role":"user","content":"hi"}]}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Service-Key", strings.TrimSpace(string(key)))
	req.Header.Set("X-Caller-Service", "executor")
	req.Header.Set("X-Org-ID", "00000000-0000-0000-0000-000000000000")
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)

	// Plain HTTP to the TLS port gets nowhere.
	if resp, err := http.Get("http://" + s.RouterAddr + "/healthz"); err == nil {
		resp.Body.Close()
		require.NotEqual(t, http.StatusOK, resp.StatusCode)
	}
}
