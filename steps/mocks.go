package steps

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/gwdiag/gwdiag/refproxy/mock"
)

// mockSet is the mock backends of one scenario, served from this process on
// loopback ports (refproxy/mock).
type mockSet struct {
	servers  map[string]*mock.Server
	counters map[string]*mock.Counter
	addrs    map[string]string
}

func startMocks(backends []Backend) (*mockSet, error) {
	m := &mockSet{servers: map[string]*mock.Server{}, counters: map[string]*mock.Counter{}, addrs: map[string]string{}}
	for _, b := range backends {
		switch b.Kind {
		case BackendUnreachable:
			// A port that was free a moment ago: nothing listens there, so
			// the proxy gets connection refused, a transport error.
			p, err := freePort()
			if err != nil {
				m.close()
				return nil, err
			}
			m.addrs[b.Name] = fmt.Sprintf("127.0.0.1:%d", p)
			continue
		case BackendEcho:
			e := mock.NewEcho()
			m.counters[b.Name] = &e.Counter
			if err := m.listen(b.Name, e); err != nil {
				return nil, err
			}
		case BackendLLM:
			l := mock.NewLLM()
			m.counters[b.Name] = &l.Counter
			if err := m.listen(b.Name, l); err != nil {
				return nil, err
			}
		default:
			m.close()
			return nil, fmt.Errorf("backend %q: unknown kind %q", b.Name, b.Kind)
		}
	}
	return m, nil
}

func (m *mockSet) listen(name string, h http.Handler) error {
	s, err := mock.Listen("127.0.0.1:0", h)
	if err != nil {
		m.close()
		return fmt.Errorf("backend %q: %w", name, err)
	}
	m.servers[name] = s
	m.addrs[name] = s.Addr()
	return nil
}

func (m *mockSet) addr(name string) (string, error) {
	a, ok := m.addrs[name]
	if !ok {
		return "", fmt.Errorf("no backend %q in this scenario", name)
	}
	return a, nil
}

func (m *mockSet) requests(name string) (int64, error) {
	c, ok := m.counters[name]
	if !ok {
		return 0, fmt.Errorf("no counting backend %q in this scenario", name)
	}
	return c.Count(), nil
}

func (m *mockSet) close() {
	var errs []error
	for _, s := range m.servers {
		errs = append(errs, s.Close())
	}
	_ = errors.Join(errs...)
}
