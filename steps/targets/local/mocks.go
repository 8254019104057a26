package local

import (
	"errors"
	"fmt"
	"net/http"
	"syscall"

	"github.com/gwdiag/gwdiag/steps/mock"

	"github.com/gwdiag/gwdiag/steps/targets"
)

// Mocks is the mock backends of one scenario, served from this process on
// loopback ports (steps/mock).
type Mocks struct {
	servers  map[string]*mock.Server
	counters map[string]*mock.Counter
	llms     map[string]*mock.LLM
	addrs    map[string]string
	reserved []int
}

func StartMocks(backends []targets.Backend) (*Mocks, error) {
	m := &Mocks{servers: map[string]*mock.Server{}, counters: map[string]*mock.Counter{}, llms: map[string]*mock.LLM{}, addrs: map[string]string{}}
	for _, b := range backends {
		switch b.Kind {
		case targets.BackendUnreachable:
			// A port bound but not listening: nobody else can take it while
			// the scenario runs, and connecting to it is refused, a
			// transport error.
			fd, port, err := ReservePort()
			if err != nil {
				m.Close()
				return nil, fmt.Errorf("backend %q: %w", b.Name, err)
			}
			m.reserved = append(m.reserved, fd)
			m.addrs[b.Name] = fmt.Sprintf("127.0.0.1:%d", port)
			continue
		case targets.BackendEcho:
			e := mock.NewEcho()
			m.counters[b.Name] = &e.Counter
			if err := m.listen(b.Name, e); err != nil {
				return nil, err
			}
		case targets.BackendLLM:
			l := mock.NewLLM()
			m.counters[b.Name] = &l.Counter
			m.llms[b.Name] = l
			if err := m.listen(b.Name, l); err != nil {
				return nil, err
			}
		default:
			m.Close()
			return nil, fmt.Errorf("backend %q: unknown kind %q", b.Name, b.Kind)
		}
	}
	return m, nil
}

func (m *Mocks) listen(name string, h http.Handler) error {
	s, err := mock.Listen("127.0.0.1:0", h)
	if err != nil {
		m.Close()
		return fmt.Errorf("backend %q: %w", name, err)
	}
	m.servers[name] = s
	m.addrs[name] = s.Addr()
	return nil
}

func (m *Mocks) Addr(name string) (string, error) {
	return targets.Named(m.addrs, "backend", name)
}

func (m *Mocks) Requests(name string) (int64, error) {
	c, err := targets.Named(m.counters, "counting backend", name)
	if err != nil {
		return 0, err
	}
	return c.Count(), nil
}

// Release lets the named LLM backend finish the streams held under key.
func (m *Mocks) Release(name, key string) error {
	l, err := targets.Named(m.llms, "LLM backend", name)
	if err != nil {
		return err
	}
	l.Release(key)
	return nil
}

func (m *Mocks) Close() {
	for _, fd := range m.reserved {
		syscall.Close(fd)
	}
	m.reserved = nil
	var errs []error
	for _, s := range m.servers {
		errs = append(errs, s.Close())
	}
	_ = errors.Join(errs...)
}

// ReservePort binds a TCP socket to a free loopback port without listening:
// connecting to the port is refused while the socket (fd, closed with
// syscall.Close) holds it, and no other program can take it.
func ReservePort() (fd, port int, err error) {
	// Close-on-exec as the net package makes it where SOCK_CLOEXEC is
	// not a flag of socket(2) (macOS): under ForkLock, so that no child
	// started meanwhile inherits the socket and holds the port.
	syscall.ForkLock.RLock()
	fd, err = syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fd)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return 0, 0, err
	}
	if err = syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		syscall.Close(fd)
		return 0, 0, err
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		syscall.Close(fd)
		return 0, 0, err
	}
	return fd, sa.(*syscall.SockaddrInet4).Port, nil
}
