// Package rootcmd assembles the gwdiag command tree: trace, config,
// conformance, completion and version.
package rootcmd

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/gwdiag/gwdiag/cli/configcmd"
	"github.com/gwdiag/gwdiag/cli/conformance"
	"github.com/gwdiag/gwdiag/cli/tracecmd"
	"github.com/gwdiag/gwdiag/cli/versioncmd"
)

// New returns the root `gwdiag` command with every subcommand mounted.
func New() *cobra.Command {
	root := &cobra.Command{
		Use:   "gwdiag",
		Short: "Diagnose gateway proxies: trace requests, inspect configuration, run conformance",
		Long: `gwdiag talks to a gateway proxy's admin server (port 15000) to trace how the
proxy handles a request, to summarise the configuration it has loaded, and to
run the gateway-diagnostics conformance suite against it.`,
		Example: `  # Trace the next request reaching a standalone proxy
  gwdiag trace --local

  # Send a request yourself and trace it
  gwdiag trace --local --port 3000 -- http://example.com/get -H 'x-test: 1'

  # Show backends with traffic
  gwdiag config backends --local`,
		Version:       versioncmd.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("{{.Version}}\n")
	// A bad flag value is a usage error in every subcommand: exit status 2.
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return flagError{err} })
	conf := conformance.NewCommand()
	if conf.Example == "" {
		// Every command's --help shows examples; the conformance package
		// documents its subcommands, this covers the group itself.
		conf.Example = `  gwdiag conformance run --target inprocess --report conformance-report.yaml
  gwdiag conformance --help`
	}
	root.AddCommand(
		tracecmd.NewCommand(),
		configcmd.NewCommand(),
		conf,
		versioncmd.NewCommand(),
	)
	addCompletionHelp(root)
	return root
}

// completionExamples are shown by `gwdiag completion <shell> --help`.
var completionExamples = map[string]string{
	"completion": `  # Load completions into the current bash session
  source <(gwdiag completion bash)`,
	"bash": `  source <(gwdiag completion bash)
  gwdiag completion bash > /etc/bash_completion.d/gwdiag`,
	"zsh":        `  gwdiag completion zsh > "${fpath[1]}/_gwdiag"`,
	"fish":       `  gwdiag completion fish > ~/.config/fish/completions/gwdiag.fish`,
	"powershell": `  gwdiag completion powershell | Out-String | Invoke-Expression`,
	"help": `  gwdiag help trace
  gwdiag help config backends`,
}

// addCompletionHelp creates cobra's default completion and help commands now,
// rather than at Execute, so that they carry examples like every other command.
func addCompletionHelp(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	root.InitDefaultHelpCmd()
	for _, c := range root.Commands() {
		if c.Name() != "completion" && c.Name() != "help" {
			continue
		}
		c.Example = completionExamples[c.Name()]
		for _, sub := range c.Commands() {
			sub.Example = completionExamples[sub.Name()]
		}
	}
}

// ExitCoder is an error that carries the process exit status it asks for,
// such as 1 for "traces differ" as opposed to 2 for a usage error.
type ExitCoder interface {
	ExitCode() int
}

// flagError is a flag that cobra could not parse.
type flagError struct{ error }

func (flagError) ExitCode() int   { return 2 }
func (e flagError) Unwrap() error { return e.error }

// ExitCode returns the exit status for err: the one it asks for, or 1.
func ExitCode(err error) int {
	var ec ExitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	return 1
}
