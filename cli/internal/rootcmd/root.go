// Package rootcmd assembles the gwdiag command tree: trace, config,
// conformance, completion and version.
package rootcmd

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gwdiag/gwdiag/cli/internal/configcmd"
	"github.com/gwdiag/gwdiag/cli/internal/conformance"
	"github.com/gwdiag/gwdiag/cli/internal/exitcode"
	"github.com/gwdiag/gwdiag/cli/internal/tracecmd"
	"github.com/gwdiag/gwdiag/cli/internal/versioncmd"
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
		Version:       versioncmd.Release(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("{{.Version}}\n")
	// A bad flag value is a usage error in every subcommand: exit status 2.
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return exitcode.Usage(err) })
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
	usageArgs(root)
	return root
}

// usageArgs makes every bad argument a usage error (exit status 2): each
// command's argument check is wrapped, and a command that only groups
// subcommands answers an unknown one itself (cobra reports it as a plain
// error, exit status 1) and shows its help when called bare.
func usageArgs(c *cobra.Command) {
	if check := c.Args; !c.HasSubCommands() || c.Runnable() {
		if check != nil {
			c.Args = func(cmd *cobra.Command, args []string) error { return exitcode.Usage(check(cmd, args)) }
		}
	} else {
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				msg += "; did you mean " + strings.Join(s, " or ") + "?"
			}
			return exitcode.Usagef("%s (see %s --help)", msg, cmd.CommandPath())
		}
	}
	for _, sub := range c.Commands() {
		usageArgs(sub)
	}
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

// ExitCode returns the exit status for err (exitcode.Code).
func ExitCode(err error) int { return exitcode.Code(err) }
