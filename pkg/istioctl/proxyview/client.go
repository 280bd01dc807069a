package proxyview

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Client reads istiod's debug endpoints.
type Client struct {
	// Istiod is istiod's debug address ("http://127.0.0.1:8080").
	Istiod string
	HTTP   *http.Client
	// Token, when set, goes with every request as "Authorization: Bearer":
	// Istio's istiod answers its debug endpoints only to loopback callers
	// (a port-forward) and to callers with a service-account token.
	Token string
}

// ErrUnauthorized says istiod answered 401: it wants a token (Token).
var ErrUnauthorized = errors.New("istiod wants a service-account token for the istio-ca audience")

func (c *Client) get(ctx context.Context, base, path string, out any) error {
	body, err := c.getBody(ctx, base, path)
	if err != nil {
		return err
	}
	return json.Unmarshal(body, out)
}

func (c *Client) getBody(ctx context.Context, base, path string) ([]byte, error) {
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+path, nil)
	if err != nil {
		return nil, err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return nil, fmt.Errorf("GET %s: %s: %w", path, resp.Status, ErrUnauthorized)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("GET %s: %s: %s", path, resp.Status, strings.TrimSpace(string(body)))
	}
	return body, nil
}

// Status fetches /debug/syncz, from Skiff's istiod or Istio's.
func (c *Client) Status(ctx context.Context) ([]ProxyStatus, error) {
	body, err := c.getBody(ctx, c.Istiod, "/debug/syncz")
	if err != nil {
		return nil, err
	}
	return ParseSyncz(body)
}
