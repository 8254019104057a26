// Command specminimal runs the spec-minimal proxy of steps/specminimal as a
// process, so that it can be validated as any third-party proxy is:
//
//	gwdiag conformance run --target process --proxy-cmd 'specminimal -f {config}'
//
// It reads the standalone config the suite's process target writes (binds,
// listeners, routes, backends, and route localRateLimit buckets, which it
// turns back into per-unit limits for its fixed windows). A gateway-wide
// policy is refused: the spec-minimal proxy has route limits only. It runs
// until SIGTERM or /quitquitquit (which -ignore-quit, a fault for the
// suite's own tests, ignores).
package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gwdiag/gwdiag/steps/specminimal"
)

// file is the part of the standalone config the spec-minimal proxy reads.
type file struct {
	Config struct {
		AdminAddr string `yaml:"adminAddr"`
	} `yaml:"config"`
	Binds []struct {
		Port      int `yaml:"port"`
		Listeners []struct {
			Name   string `yaml:"name"`
			Routes []struct {
				Name    string `yaml:"name"`
				Matches []struct {
					Path struct {
						PathPrefix string `yaml:"pathPrefix"`
					} `yaml:"path"`
				} `yaml:"matches"`
				Backends []struct {
					Host string `yaml:"host"`
					AI   *struct {
						HostOverride string `yaml:"hostOverride"`
					} `yaml:"ai"`
				} `yaml:"backends"`
				Policies struct {
					LocalRateLimit []struct {
						MaxTokens     uint64 `yaml:"maxTokens"`
						TokensPerFill uint64 `yaml:"tokensPerFill"`
						FillInterval  string `yaml:"fillInterval"`
						Type          string `yaml:"type"`
					} `yaml:"localRateLimit"`
				} `yaml:"policies"`
			} `yaml:"routes"`
		} `yaml:"listeners"`
	} `yaml:"binds"`
	Policies []any `yaml:"policies"`
}

// load turns the config file into the proxy's Config.
func load(path string) (specminimal.Config, error) {
	var cfg specminimal.Config
	b, err := os.ReadFile(path)
	if err != nil {
		return cfg, err
	}
	var f file
	if err := yaml.Unmarshal(b, &f); err != nil {
		return cfg, fmt.Errorf("%s: %w", path, err)
	}
	if len(f.Policies) > 0 {
		return cfg, fmt.Errorf("%s: policies: the spec-minimal proxy has route limits only", path)
	}
	cfg.AdminAddr = f.Config.AdminAddr
	if a := os.Getenv("ADMIN_ADDR"); a != "" {
		cfg.AdminAddr = a
	}
	for _, b := range f.Binds {
		for _, l := range b.Listeners {
			ml := specminimal.Listener{Name: l.Name, Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(b.Port))}
			for _, r := range l.Routes {
				if len(r.Matches) != 1 || len(r.Backends) != 1 {
					return cfg, fmt.Errorf("%s: route %q: want one path-prefix match and one backend", path, r.Name)
				}
				mr := specminimal.Route{Name: r.Name, PathPrefix: r.Matches[0].Path.PathPrefix, Backend: r.Backends[0].Host}
				if ai := r.Backends[0].AI; ai != nil {
					mr.Backend = ai.HostOverride
				}
				for _, lim := range r.Policies.LocalRateLimit {
					unit, err := time.ParseDuration(lim.FillInterval)
					if err != nil || lim.TokensPerFill == 0 || lim.MaxTokens < lim.TokensPerFill {
						return cfg, fmt.Errorf("%s: route %q: a limit of %+v is not amount per unit plus burst", path, r.Name, lim)
					}
					mr.Limits = append(mr.Limits, specminimal.Limit{Tokens: lim.Type == "tokens", Amount: lim.TokensPerFill,
						Unit: unit, Burst: lim.MaxTokens - lim.TokensPerFill})
				}
				ml.Routes = append(ml.Routes, mr)
			}
			cfg.Listeners = append(cfg.Listeners, ml)
		}
	}
	return cfg, nil
}

func main() {
	fs := flag.NewFlagSet("specminimal", flag.ContinueOnError)
	path := fs.String("f", "", "config file (the standalone format the suite writes)")
	ignoreQuit := fs.Bool("ignore-quit", false, "a fault for the suite's own tests: answer /quitquitquit and keep serving")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if *path == "" {
		fmt.Fprintln(os.Stderr, "specminimal: usage: specminimal [-ignore-quit] -f config.yaml")
		os.Exit(2)
	}
	if err := run(*path, *ignoreQuit); err != nil {
		fmt.Fprintln(os.Stderr, "specminimal:", err)
		os.Exit(1)
	}
}

func run(path string, ignoreQuit bool) error {
	cfg, err := load(path)
	if err != nil {
		return err
	}
	cfg.IgnoreQuit = ignoreQuit
	p, err := specminimal.Start(cfg)
	if err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	select {
	case <-sig:
	case <-p.Done():
	}
	if err := p.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		return err
	}
	return nil
}
