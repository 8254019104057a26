package mock

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

// RemoteCount asks the mock server at addr (host:port, or a pool's server
// as PoolControl names it) how many requests it received: GET /__count.
// Targets that run the mocks out of process (a container, a pod) use it.
func RemoteCount(ctx context.Context, addr string) (int64, error) {
	b, err := control(ctx, addr, http.MethodGet, "/__count")
	if err != nil {
		return 0, err
	}
	var c struct{ Count int64 }
	if err := json.Unmarshal(b, &c); err != nil {
		return 0, fmt.Errorf("GET /__count: %w", err)
	}
	return c.Count, nil
}

// RemoteRelease releases the streams the mock LLM at addr holds under key:
// POST /__release?key=KEY.
func RemoteRelease(ctx context.Context, addr, key string) error {
	_, err := control(ctx, addr, http.MethodPost, "/__release?key="+url.QueryEscape(key))
	return err
}

// control sends one request to a control endpoint, on a connection of its
// own (a forwarded or published port may not survive keep-alive).
func control(ctx context.Context, addr, method, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, nil)
	if err != nil {
		return nil, err
	}
	req.Close = true
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err == nil && resp.StatusCode/100 != 2 {
		err = fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(b))
	}
	return b, err
}

// Remote answers how many requests a target's mock backends received and
// releases what they hold (targets.Deployment's BackendRequests and
// ReleaseHeld), for a target that runs them out of process (a container,
// a pod), through each one's control endpoint (RemoteCount,
// RemoteRelease).
type Remote struct {
	// Control is the address of the named mock backend's control endpoint.
	Control func(backend string) (string, error)
	// Failed is the error of one whose control endpoint at addr did not
	// answer as it should.
	Failed func(backend, addr string, err error) error
}

// BackendRequests is how many requests the named backend received.
func (m Remote) BackendRequests(ctx context.Context, backend string) (int64, error) {
	a, err := m.Control(backend)
	if err != nil {
		return 0, err
	}
	n, err := RemoteCount(ctx, a)
	if err != nil {
		return 0, m.Failed(backend, a, err)
	}
	return n, nil
}

// ReleaseHeld lets the named LLM backend finish the streams it holds
// under key.
func (m Remote) ReleaseHeld(ctx context.Context, backend, key string) error {
	a, err := m.Control(backend)
	if err != nil {
		return err
	}
	if err := RemoteRelease(ctx, a, key); err != nil {
		return m.Failed(backend, a, err)
	}
	return nil
}
